"""``hookbus copilot install`` and ``hookbus qwen-code install`` on real files: Copilot CLI's
hooks file (hookbus's own ``hookbus.json``, entries listed directly under each event) and
Qwen Code's settings.json (Claude Code's shape, timeouts in ms). The user's own entries
stay, a second run changes nothing, the guards' commands still deny when hookbus cannot
start, and ``uninstall`` takes out exactly what was added."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hookbus.harnesses.install import copilot as copilot_install
from hookbus.harnesses.install import qwen_code as qwen_install
from hookbus.harnesses.install.claude_code import InstallError

ROOT = Path(__file__).resolve().parents[2]
HOOKBUS = "/opt/hookbus/bin/hookbus"

COPILOT_OWN: dict[str, Any] = {
    "version": 1,
    "hooks": {"PreToolUse": [{"type": "command", "bash": "./my-check.sh", "timeoutSec": 5}]},
}
QWEN_OWN: dict[str, Any] = {
    "model": {"name": "qwen3-coder"},
    "hooks": {
        "PreToolUse": [
            {"matcher": "write_file", "hooks": [{"type": "command", "command": "./mine.sh"}]}
        ]
    },
}


def _write(path: Path, data: Any) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, indent=2) + "\n"
    path.write_text(text)
    return text


def test_copilot_install_writes_its_own_hooks_file_in_copilots_shape(tmp_path: Path) -> None:
    path = copilot_install.settings_path("user", home=tmp_path)
    assert path == tmp_path / ".copilot" / "hooks" / "hookbus.json"
    change = copilot_install.install(path, command=HOOKBUS)
    assert change.changed
    data = json.loads(path.read_text())
    assert list(data) == ["version", "hooks"] and data["version"] == 1
    assert set(data["hooks"]) == set(copilot_install.installable_events())
    (entry,) = data["hooks"]["PostToolUse"]
    assert entry == {
        "type": "command",
        "bash": f"{HOOKBUS} copilot hook --timeout 10",
        "timeoutSec": 10,
    }
    (guard,) = data["hooks"]["PreToolUse"]
    # a guard may be parked for an operator: its entry outlasts approvals.wait_s
    assert guard["bash"].startswith(f"{HOOKBUS} copilot hook --timeout 610 || printf ")
    assert guard["timeoutSec"] == 610
    assert copilot_install.is_ours(guard) and not copilot_install.is_ours({"bash": "./x.sh"})


def test_copilot_guard_fallbacks_print_copilots_own_denies(tmp_path: Path) -> None:
    for event, field in (("PreToolUse", "permissionDecision"), ("PermissionRequest", "behavior")):
        entry = copilot_install.entry_for(event, command=str(tmp_path / "missing"))
        done = subprocess.run(["bash", "-c", entry["bash"]], capture_output=True, text=True)
        assert done.returncode == 0
        out = json.loads(done.stdout)
        assert out[field] == "deny"
        assert "hookbus copilot hook could not run" in json.dumps(out)


def test_copilot_install_keeps_the_users_entries_and_uninstall_restores_the_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "hooks.json"
    original = _write(path, COPILOT_OWN)
    copilot_install.install(path, command=HOOKBUS)
    hooks = json.loads(path.read_text())["hooks"]
    assert hooks["PreToolUse"][0] == COPILOT_OWN["hooks"]["PreToolUse"][0]
    assert len(hooks["PreToolUse"]) == 2
    again = copilot_install.install(path, command=HOOKBUS)
    assert not again.changed and again.added == ()
    gone = copilot_install.uninstall(path)
    assert set(gone.removed) == set(copilot_install.installable_events())
    assert json.loads(path.read_text()) == json.loads(original)


def test_copilot_uninstall_of_a_file_only_hookbus_wrote_removes_the_file(tmp_path: Path) -> None:
    path = copilot_install.settings_path("project", project=tmp_path)
    assert path == tmp_path / ".github" / "hooks" / "hookbus.json"
    copilot_install.install(path, command=HOOKBUS, events=["PreToolUse"])
    dry = copilot_install.uninstall(path, dry_run=True)
    assert dry.changed and path.exists()
    copilot_install.uninstall(path)
    assert not path.exists()
    with pytest.raises(InstallError, match="not a Copilot CLI event"):
        copilot_install.install(path, command=HOOKBUS, events=["BeforeTool"])


def test_qwen_install_writes_ms_timeouts_and_keeps_the_users_hooks(tmp_path: Path) -> None:
    path = qwen_install.settings_path("user", home=tmp_path)
    assert path == tmp_path / ".qwen" / "settings.json"
    original = _write(path, QWEN_OWN)
    qwen_install.install(path, command=HOOKBUS)
    data = json.loads(path.read_text())
    assert data["model"] == QWEN_OWN["model"]
    groups = data["hooks"]["PreToolUse"]
    assert groups[0] == QWEN_OWN["hooks"]["PreToolUse"][0]
    (entry,) = groups[1]["hooks"]
    assert entry["timeout"] == 610_000  # a guard may be parked for an operator
    assert entry["command"].startswith(f"{HOOKBUS} qwen-code hook --timeout 610 || printf ")
    (after,) = data["hooks"]["PostToolUse"][0]["hooks"]
    assert (after["timeout"], after["command"]) == (
        10_000,
        f"{HOOKBUS} qwen-code hook --timeout 10",
    )
    assert "MessageDisplay" not in data["hooks"]
    assert not qwen_install.install(path, command=HOOKBUS).changed
    qwen_install.uninstall(path)
    assert path.read_text() == original


def test_qwen_guard_fallback_prints_claude_codes_deny(tmp_path: Path) -> None:
    entry = qwen_install.entry_for("PreToolUse", command=str(tmp_path / "missing"))
    done = subprocess.run(["bash", "-c", entry["command"]], capture_output=True, text=True)
    assert done.returncode == 0
    specific = json.loads(done.stdout)["hookSpecificOutput"]
    assert specific["permissionDecision"] == "deny"
    assert "hookbus qwen-code hook could not run" in specific["permissionDecisionReason"]


@pytest.mark.parametrize("cli", ["copilot", "qwen-code"])
def test_the_generated_commands_install_print_the_diff_and_uninstall(
    cli: str, tmp_path: Path
) -> None:
    path = tmp_path / "hooks.json"

    def hookbus(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "hookbus", cli, *args, "--settings", str(path)],
            capture_output=True,
            text=True,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "dry run" in hookbus("install", "--dry-run", "--command", HOOKBUS)
    assert not path.exists()
    assert f"{cli} hook" in hookbus("install", "--command", HOOKBUS, "--verbose")
    assert "already installed" in hookbus("install", "--command", HOOKBUS)
    report = json.loads(hookbus("uninstall", "--json"))
    assert report["written"] and report["removed"]
