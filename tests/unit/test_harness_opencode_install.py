"""``hookbus opencode|kilo install`` / ``uninstall``: one plugin file of hookbus's own, its
hook points from the adapter table, never a file it did not write, a load check with the
CLI's own runtime, and ``hookbus doctor`` reading what it wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hookbus.harnesses import doctor
from hookbus.harnesses.install import kilo, opencode
from hookbus.harnesses.install.opencode import PLUGIN, PluginLoadError, config_of
from hookbus.harnesses.install.settings_file import SettingsFileError
from hookbus.harnesses.install.table import InstallError
from hookbus.harnesses.opencode_adapter import ADAPTER, TOOL_BEFORE

ROOT = Path(__file__).resolve().parents[2]
HOOKBUS = "/opt/hookbus/bin/hookbus"


def points(path: Path) -> dict[str, dict[str, object]]:
    return config_of(path.read_text())


def fake_runtime(folder: Path, name: str, body: str) -> Path:
    """An executable ``name`` standing in for the CLI's runtime (``-e <probe>``)."""
    folder.mkdir(parents=True, exist_ok=True)
    binary = folder / name
    binary.write_text(f"#!/bin/sh\n{body}\n")
    binary.chmod(0o755)
    return folder


def test_install_writes_every_hook_point_with_its_command_and_the_guard_marked(
    tmp_path: Path,
) -> None:
    path = tmp_path / "plugin" / "hookbus.js"
    change = PLUGIN.install(path, command=HOOKBUS)
    assert change.before is None and change.changed
    found = points(path)
    assert list(found) == [name for name, route in ADAPTER.routes.items() if route.install]
    guard = found[TOOL_BEFORE]
    # a tool call may be parked for an operator: its wait is above the longest approval wait
    assert guard == {
        "hook": TOOL_BEFORE,
        "guard": True,
        "request": True,
        "wait_s": 610,
        "command": f"{HOOKBUS} opencode hook --timeout 610",
    }
    assert found["session.idle"]["hook"] == "event"
    assert found["chat.message"] == {
        "hook": "chat.message",
        "guard": False,
        "request": True,
        "wait_s": 10,
        "command": f"{HOOKBUS} opencode hook --timeout 10",
    }
    assert "import " in path.read_text() and "__CONFIG__" not in path.read_text()


def test_reinstalling_changes_nothing_and_events_choose_the_points(tmp_path: Path) -> None:
    path = tmp_path / "hookbus.js"
    PLUGIN.install(path, command=HOOKBUS)
    assert not PLUGIN.install(path, command=HOOKBUS).changed
    change = PLUGIN.install(path, command=HOOKBUS, events=[TOOL_BEFORE, "tool.execute.after"])
    assert list(points(path)) == [TOOL_BEFORE, "tool.execute.after"]
    assert "session.idle" in change.removed and not change.added
    with pytest.raises(InstallError, match="not a OpenCode event"):
        PLUGIN.install(path, command=HOOKBUS, events=["PreToolUse"])


def test_http_mode_points_the_plugin_at_the_gateway(tmp_path: Path) -> None:
    path = tmp_path / "hookbus.js"
    kilo.PLUGIN.install(path, mode="http", url="http://gw:8787/")
    guard = points(path)[TOOL_BEFORE]
    assert guard["url"] == "http://gw:8787/v1/hooks/kilo?timeout=610"
    assert "command" not in guard
    assert "`hookbus kilo install`" in path.read_text()


def test_a_file_hookbus_did_not_write_is_never_overwritten_or_removed(tmp_path: Path) -> None:
    path = tmp_path / "hookbus.js"
    path.write_text("export const Mine = async () => ({});\n")
    with pytest.raises(SettingsFileError, match="not written by hookbus"):
        PLUGIN.install(path, command=HOOKBUS)
    assert not PLUGIN.uninstall(path).changed
    assert path.read_text() == "export const Mine = async () => ({});\n"


def test_uninstall_removes_the_plugin_and_the_folder_it_leaves_empty(tmp_path: Path) -> None:
    path = tmp_path / ".opencode" / "plugin" / "hookbus.js"
    PLUGIN.install(path, command=HOOKBUS)
    assert PLUGIN.uninstall(path, dry_run=True).changed and path.exists()
    change = PLUGIN.uninstall(path)
    assert TOOL_BEFORE in change.removed
    assert not path.parent.exists() and (tmp_path / ".opencode").is_dir()
    kept = tmp_path / "other" / "plugin"
    PLUGIN.install(kept / "hookbus.js", command=HOOKBUS)
    (kept / "mine.js").write_text("export const Mine = async () => ({});\n")
    PLUGIN.uninstall(kept / "hookbus.js")
    assert [p.name for p in kept.iterdir()] == ["mine.js"]


def test_the_user_scope_follows_xdg_config_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert PLUGIN.settings_path("user") == tmp_path / "xdg" / "opencode" / "plugin" / "hookbus.js"
    assert kilo.PLUGIN.settings_path("user") == tmp_path / "xdg" / "kilo" / "plugin" / "hookbus.js"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    expected = tmp_path / ".config" / "opencode" / "plugin" / "hookbus.js"
    assert PLUGIN.settings_path("user", home=tmp_path) == expected
    assert PLUGIN.settings_path("project", project=tmp_path) == (
        tmp_path / ".opencode" / "plugin" / "hookbus.js"
    )


def test_a_plugin_the_cli_cannot_load_is_removed_again_and_the_install_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = '[ "$BUN_BE_BUN" = 1 ] || exit 3\necho "SyntaxError: Unexpected token" >&2\nexit 1'
    monkeypatch.setenv("PATH", str(fake_runtime(tmp_path / "bin", "opencode", body)))
    path = tmp_path / "plugin" / "hookbus.js"
    with pytest.raises(PluginLoadError, match=r"does not load with .*SyntaxError"):
        opencode.INSTALLER.install(path, scope="user", dry_run=False, command=HOOKBUS)
    assert not path.exists()


def test_a_plugin_that_loads_says_with_what_and_no_runtime_is_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads = f'[ "$BUN_BE_BUN" = 1 ] && echo {opencode.LOADED}'
    monkeypatch.setenv("PATH", str(fake_runtime(tmp_path / "bin", "kilo", loads)))
    path = tmp_path / "plugin" / "hookbus.js"
    outcome = kilo.INSTALLER.install(path, scope="user", dry_run=False, command=HOOKBUS)
    assert outcome.extra == {"load_check": f"loads with {tmp_path / 'bin' / 'kilo'}"}
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    outcome = kilo.INSTALLER.install(path, scope="user", dry_run=False, command="/other")
    assert outcome.extra["load_check"] == "not checked: neither kilo nor node is on PATH"
    assert "Kilo CLI skips a plugin that fails to load" in outcome.extra["warning"]


def cli_install(path: Path, home: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hookbus", "opencode", "install", "--settings", str(path), *extra],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "HOME": str(home), "PATH": str(home / "empty")},
        timeout=60,
    )


def test_the_cli_warns_when_it_cannot_check_that_the_plugin_loads(tmp_path: Path) -> None:
    path = tmp_path / "plugin" / "hookbus.js"
    done = cli_install(path, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "WARNING:" in done.stderr and "not checked: neither opencode nor node" in done.stderr
    assert f"installed hookbus into {path}" in done.stdout
    # rewriting its own plugin keeps no backup, and the summary names none
    done = cli_install(path, tmp_path, "--command", HOOKBUS)
    assert done.returncode == 0, done.stderr
    assert "the file as it was before hookbus" not in done.stdout
    assert [p.name for p in path.parent.iterdir()] == ["hookbus.js"]


def test_doctor_reads_the_plugins_points_and_its_guard_fails_closed(tmp_path: Path) -> None:
    path = tmp_path / "hookbus.js"
    PLUGIN.install(path)
    report = doctor.check_scope(ADAPTER, opencode.INSTALLER, "user", path, os.environ["PATH"])
    assert TOOL_BEFORE in report.events
    assert not [f for f in report.findings if f.severity == doctor.FAILS_OPEN]
    PLUGIN.install(path, events=["tool.execute.after"])
    report = doctor.check_scope(ADAPTER, opencode.INSTALLER, "user", path, os.environ["PATH"])
    (missing,) = report.findings
    assert (missing.severity, missing.message) == (
        doctor.FAILS_OPEN,
        f"guard event(s) not installed: {TOOL_BEFORE}",
    )
    assert json.loads(json.dumps(opencode.INSTALLER.entries(path)))


def test_doctor_says_a_plugin_the_cli_would_not_load_fails_open(tmp_path: Path) -> None:
    path = tmp_path / "hookbus.js"
    PLUGIN.install(path, command=HOOKBUS)
    loads = fake_runtime(tmp_path / "ok", "opencode", f"echo {opencode.LOADED}")
    report = doctor.check_scope(ADAPTER, opencode.INSTALLER, "user", path, str(loads))
    assert not [f for f in report.findings if f.severity == doctor.FAILS_OPEN]
    broken = fake_runtime(tmp_path / "bad", "opencode", "echo 'SyntaxError: x' >&2; exit 1")
    report = doctor.check_scope(ADAPTER, opencode.INSTALLER, "user", path, str(broken))
    (finding,) = [f for f in report.findings if f.severity == doctor.FAILS_OPEN]
    assert finding.message.startswith(f"OpenCode skips {path} without a word: it does not load")
    assert "SyntaxError: x" in finding.message
