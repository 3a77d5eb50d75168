"""``hookbus claude-code install`` / ``uninstall`` on real settings files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hookbus.harnesses.install.claude_code import (
    InstallError,
    entry_for,
    install,
    installable_events,
    is_ours,
    settings_path,
    uninstall,
)
from hookbus.harnesses.install.settings_file import BACKUP_SUFFIX, SettingsFileError, command_calls

ROOT = Path(__file__).resolve().parents[2]
HOOKBUS = "/opt/venv/bin/hookbus"

USERS_OWN: dict[str, Any] = {
    "model": "opus",
    "permissions": {"allow": ["Bash(npm test)"]},
    "env": {"FOO": "bar"},
    "hooks": {
        "PreToolUse": [
            {"matcher": "Write|Edit", "hooks": [{"type": "command", "command": "prettier -w"}]}
        ],
        "Notification": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
    },
}


def write(path: Path, data: Any) -> str:
    text = json.dumps(data, indent=4) + "\n"
    path.write_text(text)
    return text


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def ours(data: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for event, groups in data.get("hooks", {}).items():
        for group in groups:
            for entry in group["hooks"]:
                if is_ours(entry):
                    found.setdefault(event, []).append(entry)
    return found


def test_install_adds_one_entry_per_event_and_keeps_everything_of_the_user(
    tmp_path: Path,
) -> None:
    path = tmp_path / "settings.json"
    write(path, USERS_OWN)
    change = install(path, command=HOOKBUS)
    data = load(path)
    assert change.changed
    assert set(ours(data)) == set(installable_events())
    assert all(len(entries) == 1 for entries in ours(data).values())
    for key in ("model", "permissions", "env"):
        assert data[key] == USERS_OWN[key]
    assert data["hooks"]["PreToolUse"][0] == USERS_OWN["hooks"]["PreToolUse"][0]
    assert data["hooks"]["Notification"][0] == USERS_OWN["hooks"]["Notification"][0]


def test_guards_get_a_timeout_and_block_on_failure_the_rest_only_a_timeout(
    tmp_path: Path,
) -> None:
    path = tmp_path / "settings.json"
    install(path, command=HOOKBUS)
    found = ours(load(path))
    for event, timeout in (("PreToolUse", 610), ("PermissionRequest", 610), ("PreModelSwitch", 10)):
        (entry,) = found[event]
        assert entry["onFailure"] == "block"
        # a request whose hooks may ask can be parked for an operator up to 600 s
        assert entry["timeout"] == timeout
        assert entry["command"] == f"{HOOKBUS} claude-code hook --timeout {timeout}"
    for event in ("PostToolUse", "SessionEnd", "UserPromptSubmit"):
        (entry,) = found[event]
        assert "onFailure" not in entry
        assert entry["timeout"] == 10
    assert found["Stop"][0]["timeout"] == 610  # a bidirectional supervisor may take 10 min


def test_it_never_registers_worktree_create_or_message_display(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    install(path, command=HOOKBUS)
    hooks = load(path)["hooks"]
    assert "WorktreeCreate" not in hooks
    assert "MessageDisplay" not in hooks
    for event in ("WorktreeCreate", "MessageDisplay"):
        with pytest.raises(InstallError, match=event):
            install(path, command=HOOKBUS, events=[event])


def test_an_unknown_event_is_refused_and_the_file_is_untouched(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    text = write(path, USERS_OWN)
    with pytest.raises(InstallError, match="NoSuchEvent"):
        install(path, command=HOOKBUS, events=["PreToolUse", "NoSuchEvent"])
    assert path.read_text() == text


def test_a_second_install_changes_nothing_not_even_the_bytes(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    write(path, USERS_OWN)
    install(path, command=HOOKBUS)
    first = path.read_text()
    mtime = path.stat().st_mtime_ns
    change = install(path, command=HOOKBUS)
    assert not change.changed
    assert change.diff() == ""
    assert path.read_text() == first
    assert path.stat().st_mtime_ns == mtime


def test_an_install_with_other_settings_replaces_its_own_entries_only(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    write(path, USERS_OWN)
    install(path, command=HOOKBUS)
    install(path, mode="http", url="http://10.0.0.5:9000/", events=["PreToolUse", "Stop"])
    data = load(path)
    assert set(ours(data)) == {"PreToolUse", "Stop"}
    (guard,) = ours(data)["PreToolUse"]
    assert guard == {
        "type": "http",
        "url": "http://10.0.0.5:9000/v1/hooks/claude-code?timeout=610",
        "timeout": 610,
        "onFailure": "block",
    }
    assert data["hooks"]["PreToolUse"][0] == USERS_OWN["hooks"]["PreToolUse"][0]
    assert data["hooks"]["Notification"] == USERS_OWN["hooks"]["Notification"]


def test_uninstall_removes_exactly_what_install_added(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    write(path, USERS_OWN)
    install(path, command=HOOKBUS)
    change = uninstall(path)
    assert change.changed
    assert load(path) == USERS_OWN
    assert not uninstall(path).changed


def test_uninstall_of_a_file_that_had_no_hooks_leaves_no_hooks_key(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    write(path, {"model": "sonnet"})
    install(path, command=HOOKBUS)
    uninstall(path)
    assert load(path) == {"model": "sonnet"}


def test_a_user_hook_sharing_a_group_with_ours_survives_uninstall(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    mine = {"type": "command", "command": "audit-log"}
    ours_entry = entry_for("PostToolUse", mode="command", command=HOOKBUS, url="")
    write(path, {"hooks": {"PostToolUse": [{"matcher": "*", "hooks": [mine, ours_entry]}]}})
    uninstall(path)
    assert load(path) == {"hooks": {"PostToolUse": [{"matcher": "*", "hooks": [mine]}]}}


def test_a_malformed_file_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    for text in ('{"model": "opus",', "[1, 2]", '{"hooks": []}', '{"hooks": {"Stop": {}}}'):
        path.write_text(text)
        with pytest.raises(SettingsFileError, match="not changed"):
            install(path, command=HOOKBUS)
        with pytest.raises(SettingsFileError):
            uninstall(path)
        assert path.read_text() == text
        assert not path.with_name(path.name + BACKUP_SUFFIX).exists()


def test_a_change_writes_a_backup_of_the_file_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    text = write(path, USERS_OWN)
    install(path, command=HOOKBUS)
    assert path.with_name("settings.json" + BACKUP_SUFFIX).read_text() == text


def test_dry_run_prints_the_diff_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    text = write(path, USERS_OWN)
    change = install(path, command=HOOKBUS, dry_run=True)
    assert change.changed
    assert '+            "onFailure": "block"' in change.diff()
    assert path.read_text() == text
    missing = tmp_path / "new" / "settings.json"
    assert install(missing, command=HOOKBUS, dry_run=True).changed
    assert not missing.exists()


def test_a_missing_file_and_its_folder_are_created(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.local.json"
    install(path, command=HOOKBUS, events=["PreToolUse"])
    assert set(ours(load(path))) == {"PreToolUse"}
    assert not path.with_name(path.name + BACKUP_SUFFIX).exists()


def test_no_redis_url_or_secret_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKBUS_REDIS_URL", "redis://:s3cret@redis.internal:6379/0")
    path = tmp_path / "settings.json"
    install(path)
    text = path.read_text()
    assert "redis" not in text.replace("hookbus", "")
    assert "s3cret" not in text


def test_scopes_name_claude_codes_settings_files(tmp_path: Path) -> None:
    assert settings_path("user", home=tmp_path) == tmp_path / ".claude" / "settings.json"
    assert settings_path("project", project=tmp_path) == tmp_path / ".claude" / "settings.json"
    assert settings_path("local", project=tmp_path) == (
        tmp_path / ".claude" / "settings.local.json"
    )


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("/opt/venv/bin/hookbus claude-code hook --timeout 10", True),
        ("hookbus -n prod claude-code hook", True),
        ("'/path with space/hookbus' claude-code hook", True),
        ("/usr/bin/python3 -m hookbus claude-code hook", True),
        ("my-script claude-code hook", False),
        ("hookbus gemini-cli hook", False),
        ("echo 'unbalanced", False),
    ],
)
def test_entries_are_recognised_by_what_they_run(command: str, expected: bool) -> None:
    assert command_calls(command, "claude-code") is expected


def _cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "hookbus", "claude-code", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=home,
        timeout=60,
    )


def test_the_command_installs_in_the_users_settings_then_uninstalls(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    write(path, USERS_OWN)
    done = _cli("install", "--events", "PreToolUse", "--verbose", home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert '"onFailure": "block"' in done.stdout  # the diff
    assert done.stdout.splitlines()[-1].startswith(f"installed hookbus into {path} ")
    again = _cli("install", "--events", "PreToolUse", "--json", home=tmp_path)
    assert json.loads(again.stdout)["changed"] is False
    gone = _cli("uninstall", home=tmp_path)
    assert gone.returncode == 0, gone.stderr
    assert load(path) == USERS_OWN


def test_the_command_refuses_a_malformed_file_with_exit_1(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text("{oops")
    done = _cli("install", home=tmp_path)
    assert done.returncode == 1
    assert "not valid JSON" in done.stderr
    assert path.read_text() == "{oops"


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("settings.command.json", {}),
        ("settings.http.json", {"mode": "http", "url": "http://127.0.0.1:8787"}),
    ],
)
def test_the_example_settings_are_what_the_installer_writes(
    tmp_path: Path, name: str, options: dict[str, Any]
) -> None:
    path = tmp_path / name
    install(path, command="hookbus", **options)
    assert path.read_text() == (ROOT / "examples" / "claude-code" / name).read_text()


def test_http_entries_can_send_a_bearer_token_by_variable_name_only(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    install(path, mode="http", events=["PreToolUse"], token_env="HOOKBUS_GATEWAY_TOKEN")
    (entry,) = ours(load(path))["PreToolUse"]
    assert entry["headers"] == {"Authorization": "Bearer ${HOOKBUS_GATEWAY_TOKEN}"}
    assert entry["allowedEnvVars"] == ["HOOKBUS_GATEWAY_TOKEN"]
    for bad in ({"mode": "command"}, {"mode": "http", "token_env": "not a name"}):
        options: dict[str, Any] = {"token_env": "T", **bad}
        with pytest.raises(InstallError, match="token-env"):
            install(path, command=HOOKBUS, **options)


def test_an_event_only_newer_claude_codes_send_is_written_only_for_them(tmp_path: Path) -> None:
    unknown, old, new = (tmp_path / f"{n}.json" for n in ("unknown", "old", "new"))
    install(unknown, command=HOOKBUS)
    install(old, command=HOOKBUS, cli_version="2.1.331")
    install(new, command=HOOKBUS, cli_version="2.1.332")

    # an older Claude Code may refuse a settings file naming an event it does not know
    assert "PreSkillShellCommand" not in ours(load(unknown))
    assert "PreSkillShellCommand" not in ours(load(old))
    [entry] = ours(load(new))["PreSkillShellCommand"]
    assert entry["onFailure"] == "block"
    assert set(ours(load(new))) == set(installable_events("2.1.332"))


def test_naming_the_newer_event_writes_it_whatever_the_version(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    install(path, command=HOOKBUS, events=["PreSkillShellCommand"])
    assert set(ours(load(path))) == {"PreSkillShellCommand"}


def test_the_command_asks_the_claude_on_path_which_events_it_knows(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "claude"
    fake.write_text("#!/bin/sh\necho '2.1.332 (Claude Code)'\n")
    fake.chmod(0o755)
    path = tmp_path / ".claude" / "settings.json"
    env_path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    done = subprocess.run(
        [sys.executable, "-m", "hookbus", "claude-code", "install"],
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(tmp_path), "PYTHONPATH": str(ROOT), "PATH": env_path},
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "PreSkillShellCommand" in ours(load(path))
