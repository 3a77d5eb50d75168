"""What each real CLI does with each way a guard hook can answer: the facts behind the
answer forms of :mod:`hookbus.harnesses.gemini_adapter` and
:mod:`hookbus.harnesses.codex_adapter` and the table in ``docs/agent-clis.md``.

A stand-in hook (no hookbus) answers the shell call ``echo ran > ran.txt`` in one way; the
test checks whether the call ran. When a new CLI version changes one of these, this test
says which, and the adapters and the doc table need a look. The hooks here are trusted with
``--dangerously-bypass-hook-trust`` (Codex): they are the test's own.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration import agent_clis
from tests.integration.fake_codex_model import FakeCodexModel
from tests.integration.fake_codex_model import serve as serve_codex
from tests.integration.fake_gemini import FakeGemini
from tests.integration.fake_gemini import serve as serve_gemini

pytestmark = pytest.mark.slow

CODEX_DENY = {
    "hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": "nope",
    }
}
#: (stdout JSON or text, exit code, stderr, sleeps past the timeout) -> ran?
GEMINI_CASES: dict[str, tuple[Any, int, str, bool, bool]] = {
    "decision deny, exit 0": ({"decision": "deny", "reason": "nope"}, 0, "", False, False),
    "exit 2 with a reason on stderr": (None, 2, "nope", False, False),
    "exit 127 with stderr (command missing)": (None, 127, "nope", False, False),
    "Claude Code's permissionDecision form": (
        {"hookSpecificOutput": {**CODEX_DENY["hookSpecificOutput"], "hookEventName": "BeforeTool"}},
        0,
        "",
        False,
        True,
    ),
    "exit 1": (None, 1, "nope", False, True),
    "exit 2 with an empty stderr": (None, 2, "", False, True),
    "a timeout": (None, 0, "", True, True),
    "stdout that is not JSON": ("garbage", 0, "", False, True),
}
CODEX_CASES: dict[str, tuple[Any, int, str, bool, bool]] = {
    "permissionDecision deny, exit 0": (CODEX_DENY, 0, "", False, False),
    "exit 2 with a reason on stderr": (None, 2, "nope", False, False),
    "a deny with an unknown extra field": (
        {"hookSpecificOutput": {**CODEX_DENY["hookSpecificOutput"], "extra": 1}},
        0,
        "",
        False,
        True,
    ),
    "a deny without a reason": (
        {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny"}},
        0,
        "",
        False,
        True,
    ),
    "ask": (
        {"hookSpecificOutput": {**CODEX_DENY["hookSpecificOutput"], "permissionDecision": "ask"}},
        0,
        "",
        False,
        True,
    ),
    "exit 2 with JSON on stdout": (CODEX_DENY, 2, "", False, True),
    "exit 1": (None, 1, "nope", False, True),
    "a timeout": (None, 0, "", True, True),
    "stdout that is not JSON": ("garbage", 0, "", False, True),
}


def _hook(tmp_path: Path, out: Any, code: int, err: str, sleep: bool) -> str:
    lines = ["import json, sys, time", "sys.stdin.read()"]
    if sleep:
        lines.append("time.sleep(6)")
    if isinstance(out, str):
        lines.append(f"print({out!r})")
    elif out is not None:
        lines.append(f"print(json.dumps({out!r}))")
    if err:
        lines.append(f"print({err!r}, file=sys.stderr)")
    lines.append(f"sys.exit({code})")
    script = tmp_path / "hook.py"
    script.write_text("\n".join(lines) + "\n")
    return f"{sys.executable} {script}"


def _dirs(tmp_path: Path) -> tuple[Path, Path]:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    return home, project


@pytest.mark.parametrize("case", sorted(GEMINI_CASES))
def test_what_gemini_cli_does_with_a_before_tool_answer(
    case: str, gemini_bin: Path, tmp_path: Path
) -> None:
    out, code, err, sleep, runs = GEMINI_CASES[case]
    home, project = _dirs(tmp_path)
    entry = {"type": "command", "command": _hook(tmp_path, out, code, err, sleep), "timeout": 2000}
    agent_clis.gemini_settings(home, {"hooks": {"BeforeTool": [{"hooks": [entry]}]}})
    model = FakeGemini([("run_shell_command", {"command": "echo ran > ran.txt"})])
    with serve_gemini(model) as url:
        done = agent_clis.run_gemini(gemini_bin, base_url=url, home=home, project=project, env={})
    assert done.returncode == 0, done.stderr[-2000:]
    assert (project / "ran.txt").exists() is runs
    if not runs:
        assert model.result_texts() == [json.dumps({"error": "Tool execution blocked: nope"})]


@pytest.mark.parametrize("case", sorted(CODEX_CASES))
def test_what_codex_does_with_a_pre_tool_use_answer(
    case: str, codex_bin: Path, tmp_path: Path
) -> None:
    out, code, err, sleep, runs = CODEX_CASES[case]
    home, project = _dirs(tmp_path)
    command = json.dumps(_hook(tmp_path, out, code, err, sleep))
    (agent_clis.codex_home(home) / "config.toml").write_text(
        "[[hooks.PreToolUse]]\n[[hooks.PreToolUse.hooks]]\n"
        f'type = "command"\ncommand = {command}\ntimeout = 2\n'
    )
    model = FakeCodexModel(["echo ran > ran.txt"])
    with serve_codex(model) as url:
        done = agent_clis.run_codex(
            codex_bin,
            base_url=url,
            home=home,
            project=project,
            env={},
            extra=("--dangerously-bypass-hook-trust",),
        )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (project / "ran.txt").exists() is runs
    if not runs:
        (text,) = model.result_texts()
        assert text.startswith("Command blocked by PreToolUse hook: nope")


def test_gemini_cli_hangs_a_headless_run_on_a_before_tool_ask(
    gemini_bin: Path, tmp_path: Path
) -> None:
    # why hookbus answers a fleet's "ask" with a deny on Gemini CLI
    home, project = _dirs(tmp_path)
    hook = _hook(tmp_path, {"decision": "ask", "reason": "nope"}, 0, "", False)
    entry = {"type": "command", "command": hook, "timeout": 2000}
    agent_clis.gemini_settings(home, {"hooks": {"BeforeTool": [{"hooks": [entry]}]}})
    model = FakeGemini([("run_shell_command", {"command": "echo ran > ran.txt"})])
    with serve_gemini(model) as url, pytest.raises(subprocess.TimeoutExpired):
        agent_clis.run_gemini(
            gemini_bin, base_url=url, home=home, project=project, env={}, timeout=25
        )
    assert not (project / "ran.txt").exists()
