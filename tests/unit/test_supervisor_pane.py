"""Reading a pane: context pressure from the status line, seed 003's state hints, and the
capture guards that must not touch tmux or Redis."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from hookbus.supervisor.capture import capture_for_hook, trigger_for
from hookbus.supervisor.pane_analysis import (
    analyse,
    context_pressure,
    pressure_level,
    state_hint,
    strip_ansi,
    tail,
)


@pytest.mark.parametrize(
    ("status", "percent"),
    [
        ("Context left until auto-compact: 12%", 88),
        ("  34% context left  ", 66),
        ("model: opus | Context: 72% | $0.12", 72),
        ("ctx 45%", 45),
        ("72% of context used", 72),
        ("██████░░░░ 61%", 61),
        ("no figures here", None),
        ("build 100% done", None),
    ],
)
def test_context_pressure_is_read_off_the_status_line(status: str, percent: int | None) -> None:
    assert context_pressure(["some output", status]) == percent


def test_the_bottom_most_figure_wins() -> None:
    assert context_pressure(["Context: 10%", "...", "Context: 55%"]) == 55


@pytest.mark.parametrize(
    ("percent", "threshold", "level"),
    [
        (45, 50, "OK"),
        (50, 50, "OK"),
        (51, 50, "WARNING"),
        (72, 50, "WARNING"),
        (80, 50, "WARNING"),
        (81, 50, "CRITICAL"),
        (81, 90, "CRITICAL"),
        (60, 70, "OK"),
        (None, 50, "UNKNOWN"),
    ],
)
def test_pressure_levels_follow_the_threshold_and_80_percent(
    percent: int | None, threshold: int, level: str
) -> None:
    assert pressure_level(percent, threshold) == level


@pytest.mark.parametrize(
    ("pane", "hint"),
    [
        ("Pick one\n❯ 1. Fix the bug\n  2. Write tests\nEnter to select · esc to cancel", "menu"),
        ("Which?\n 1) yes\n 2) no", "menu"),
        (
            "Bash command\n  rm -rf build\nDo you want to proceed?\n❯ 1. Yes\n  2. No",
            "permission_prompt",
        ),
        ("⎿  Error: ENOENT: no such file\n", "error"),
        ("API Error: 529 overloaded", "error"),
        ("✻ Thinking… (esc to interrupt)", "working"),
        ("Done.\n╭──────╮\n│ >    │\n╰──────╯\n  ? for shortcuts", "idle"),
        ("compiling stuff", "working"),
        ("", "working"),
    ],
)
def test_state_hints_follow_the_seeds_patterns(pane: str, hint: str) -> None:
    assert state_hint(pane.splitlines()) == hint


def test_red_text_saying_error_is_an_error_but_red_diff_lines_are_not() -> None:
    red_error = "\x1b[31mBuild failed\x1b[0m"
    red_diff = "\x1b[31m- old line\x1b[0m"
    plain = [strip_ansi(red_error), "? for shortcuts"]
    assert state_hint(plain, [red_error, "? for shortcuts"]) == "error"
    plain = [strip_ansi(red_diff), "? for shortcuts"]
    assert state_hint(plain, [red_diff, "? for shortcuts"]) == "idle"


def test_an_old_menu_scrolled_far_up_no_longer_counts() -> None:
    lines = ["Enter to select", *(f"output {i}" for i in range(30)), "? for shortcuts"]
    assert state_hint(lines) == "idle"


def test_analyse_keeps_the_last_lines_without_escapes_or_trailing_blank_screen() -> None:
    raw = "\n".join(f"\x1b[1mline {i}\x1b[0m" for i in range(10)) + "\n\n\n\n"
    found = analyse(raw, 3, 50)
    assert found["pane"] == "line 7\nline 8\nline 9"
    assert found["context_pressure"] == {"percent": None, "level": "UNKNOWN", "threshold": 50}
    assert tail("a\nb\n\n", 5) == ["a", "b"]


def test_triggers_follow_the_seed() -> None:
    assert trigger_for("Stop", {}) == "response_complete"
    assert trigger_for("PreCompact", {}) == "pre_compact"
    assert trigger_for("SessionEnd", {}) == "session_terminated"
    assert trigger_for("Notification", {"notification_type": "idle_prompt"}) == "idle_prompt"
    assert trigger_for("PreToolUse", {}) is None


def _no_redis(*args: Any) -> Any:
    raise AssertionError(f"Redis was called: {args}")


@pytest.mark.parametrize(
    ("kind", "payload", "environ"),
    [
        ("Stop", {}, {}),  # outside tmux
        ("Stop", {"stop_hook_active": True}, {"TMUX": "/tmp/none,1,0"}),
        ("PreToolUse", {}, {"TMUX": "/tmp/none,1,0"}),  # not a wake event
    ],
)
def test_nothing_is_captured_outside_tmux_with_stop_hook_active_or_for_other_events(
    kind: str, payload: dict[str, Any], environ: dict[str, str]
) -> None:
    assert capture_for_hook(kind, payload, environ, _no_redis, "ns") is None


def test_importing_capture_loads_no_heavy_module_and_no_subprocess() -> None:
    probe = (
        "import sys, json\nimport hookbus.supervisor.capture\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    modules = set(__import__("json").loads(out.stdout))
    heavy = {"redis", "typer", "rich", "pydantic", "msgspec", "rq", "subprocess"}
    assert sorted(m for m in modules if m.split(".")[0] in heavy) == []


def test_the_modules_a_capture_loads_import_nothing_heavy() -> None:
    """What a managed session's wake event loads on the lean path: no redis-py, CLI stack,
    pydantic or msgspec, and neither logging nor dataclasses (milliseconds per process)."""
    probe = (
        "import sys, json\n"
        "import hookbus.supervisor.capture, hookbus.supervisor.agent_lookup\n"
        "import hookbus.supervisor.tmux_driver, hookbus.supervisor.pane_analysis\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    modules = set(__import__("json").loads(out.stdout))
    heavy = {"redis", "typer", "rich", "pydantic", "msgspec", "rq", "logging", "dataclasses"}
    assert sorted(m for m in modules if m.split(".")[0] in heavy) == []
