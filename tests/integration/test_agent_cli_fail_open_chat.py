"""What GitHub Copilot CLI and Qwen Code do with each way a guard hook can answer: the facts
behind :mod:`hookbus.harnesses.copilot_adapter`, :mod:`hookbus.harnesses.qwen_adapter`, their
installers' shell fallbacks and the table in ``docs/agent-clis.md``.

A stand-in hook (no hookbus) answers the shell call ``echo ran > ran.txt`` in one way; the
test checks whether the call ran. When a new CLI version changes one of these, this test
says which. Skipped, saying why, where npm or the registry cannot be reached.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.agent_cli_helpers import cli_binary
from tests.integration import agent_clis
from tests.integration.fake_openai_chat import FakeChatModel, serve

pytestmark = pytest.mark.slow

DENY = {"permissionDecision": "deny", "permissionDecisionReason": "nope"}
CLAUDE_DENY = {"hookSpecificOutput": {"hookEventName": "PreToolUse", **DENY}}
#: (event, stdout JSON or text, exit code, sleeps past the timeout) -> ran?
COPILOT_CASES: dict[str, tuple[str, Any, int, bool, bool]] = {
    "permissionDecision deny, exit 0": ("PreToolUse", DENY, 0, False, False),
    "Claude Code's hookSpecificOutput deny": ("PreToolUse", CLAUDE_DENY, 0, False, False),
    "exit 1 (Copilot's own text)": ("PreToolUse", None, 1, False, False),
    "exit 127 (command missing)": ("PreToolUse", None, 127, False, False),
    "a timeout": ("PreToolUse", None, 0, True, True),
    "stdout that is not JSON": ("PreToolUse", "garbage", 0, False, True),
    "PermissionRequest behavior deny": (
        "PermissionRequest",
        {"behavior": "deny", "message": "nope"},
        0,
        False,
        False,
    ),
    "PermissionRequest in Claude Code's form": (
        "PermissionRequest",
        {
            "hookSpecificOutput": {
                "hookEventName": "PermissionRequest",
                "decision": {"behavior": "deny", "message": "nope"},
            }
        },
        0,
        False,
        True,
    ),
}
QWEN_CASES: dict[str, tuple[str, Any, int, bool, bool]] = {
    "hookSpecificOutput deny, exit 0": ("PreToolUse", CLAUDE_DENY, 0, False, False),
    "exit 2 with a reason on stderr": ("PreToolUse", None, 2, False, False),
    "exit 1": ("PreToolUse", None, 1, False, True),
    "exit 127 (command missing)": ("PreToolUse", None, 127, False, True),
    "a timeout": ("PreToolUse", None, 0, True, True),
    "stdout that is not JSON": ("PreToolUse", "garbage", 0, False, True),
}


@pytest.fixture(scope="module")
def copilot_bin() -> Path:
    return cli_binary("copilot")


@pytest.fixture(scope="module")
def qwen_bin() -> Path:
    return cli_binary("qwen")


def _hook(tmp_path: Path, out: Any, code: int, sleep: bool) -> str:
    lines = ["import json, sys, time", "sys.stdin.read()"]
    if sleep:
        lines.append("time.sleep(6)")
    if isinstance(out, str):
        lines.append(f"print({out!r})")
    elif out is not None:
        lines.append(f"print(json.dumps({out!r}))")
    if code:
        lines.append("print('nope', file=sys.stderr)")
    lines.append(f"sys.exit({code})")
    script = tmp_path / "hook.py"
    script.write_text("\n".join(lines) + "\n")
    return f"{sys.executable} {script}"


def _dirs(tmp_path: Path) -> tuple[Path, Path]:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    return home, project


@pytest.mark.parametrize("case", sorted(COPILOT_CASES))
def test_what_copilot_cli_does_with_a_guard_answer(
    case: str, copilot_bin: Path, tmp_path: Path
) -> None:
    event, out, code, sleep, runs = COPILOT_CASES[case]
    home, project = _dirs(tmp_path)
    entry = {"type": "command", "bash": _hook(tmp_path, out, code, sleep), "timeoutSec": 2}
    (home / ".copilot" / "hooks").mkdir(parents=True)
    (home / ".copilot" / "hooks" / "stand-in.json").write_text(
        json.dumps({"version": 1, "hooks": {event: [entry]}})
    )
    model = FakeChatModel(["echo ran > ran.txt"])
    with serve(model) as url:
        done = agent_clis.run_copilot(copilot_bin, base_url=url, home=home, project=project, env={})
    assert done.returncode == 0, done.stderr[-2000:]
    assert (project / "ran.txt").exists() is runs
    if not runs and code == 0:
        (text,) = model.result_texts()
        assert text.endswith("nope"), text


@pytest.mark.parametrize("case", sorted(QWEN_CASES))
def test_what_qwen_code_does_with_a_guard_answer(case: str, qwen_bin: Path, tmp_path: Path) -> None:
    event, out, code, sleep, runs = QWEN_CASES[case]
    home, project = _dirs(tmp_path)
    entry = {"type": "command", "command": _hook(tmp_path, out, code, sleep), "timeout": 2000}
    (home / ".qwen").mkdir()
    (home / ".qwen" / "settings.json").write_text(
        json.dumps({"hooks": {event: [{"hooks": [entry]}]}})
    )
    model = FakeChatModel(["echo ran > ran.txt"])
    with serve(model) as url:
        done = agent_clis.run_qwen(qwen_bin, base_url=url, home=home, project=project, env={})
    assert done.returncode == 0, done.stderr[-2000:]
    assert (project / "ran.txt").exists() is runs
    if not runs:
        (text,) = model.result_texts()
        assert text == "nope", text
