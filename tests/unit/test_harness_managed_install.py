"""``--scope managed`` of the installers, tried under ``--root`` (a folder standing in for
``/``): Claude Code's managed settings (``allowManagedHooksOnly`` left as the administrator
set it unless the option sets it), Codex's managed hooks in requirements.toml (no trust
records: Codex runs managed hooks untrusted), Gemini CLI's system settings. A file the
install creates is readable by every user; uninstall gives back the file byte for byte."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOOKBUS = "/opt/hookbus/bin/hookbus"


def hookbus(
    *args: str, home: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hookbus", *args],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(home), **(env or {})},
        timeout=60,
    )


def managed(cli: str, verb: str, root: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    args = [cli, verb, "--scope", "managed", "--root", str(root)]
    if verb == "install":
        args += ["--command", HOOKBUS]
    done = hookbus(*args, *extra, home=root / "home")
    assert done.returncode == 0, done.stderr
    return done


def test_claude_code_managed_settings_keep_allow_managed_hooks_only_as_set(tmp_path: Path) -> None:
    path = tmp_path / "etc" / "claude-code" / "managed-settings.json"
    path.parent.mkdir(parents=True)
    original = json.dumps({"allowManagedHooksOnly": False, "model": "opus"}, indent=2) + "\n"
    path.write_text(original)
    path.chmod(0o640)
    managed("claude-code", "install", tmp_path)
    data = json.loads(path.read_text())
    assert data["allowManagedHooksOnly"] is False and data["model"] == "opus"
    guard = data["hooks"]["PreToolUse"][0]["hooks"][0]
    assert guard["command"] == f"{HOOKBUS} claude-code hook --timeout 610"
    assert guard["onFailure"] == "block"
    assert path.stat().st_mode & 0o777 == 0o640  # an administrator's mode stays
    managed("claude-code", "uninstall", tmp_path)
    assert path.read_text() == original
    managed("claude-code", "install", tmp_path, "--allow-managed-hooks-only")
    assert json.loads(path.read_text())["allowManagedHooksOnly"] is True
    managed("claude-code", "install", tmp_path, "--no-allow-managed-hooks-only")
    managed("claude-code", "uninstall", tmp_path)
    assert json.loads(path.read_text()) == json.loads(original)


def test_a_new_managed_file_is_readable_by_every_user(tmp_path: Path) -> None:
    managed("claude-code", "install", tmp_path, "--allow-managed-hooks-only")
    path = tmp_path / "etc" / "claude-code" / "managed-settings.json"
    assert path.stat().st_mode & 0o777 == 0o644
    assert json.loads(path.read_text())["allowManagedHooksOnly"] is True


def test_codex_managed_hooks_go_to_requirements_toml_without_trust_records(
    tmp_path: Path,
) -> None:
    path = tmp_path / "etc" / "codex" / "requirements.toml"
    path.parent.mkdir(parents=True)
    original = '# fleet policy\nallowed_approval_policies = ["never"]\n'
    path.write_text(original)
    report = json.loads(managed("codex", "install", tmp_path, "--json").stdout)
    assert report["settings"] == str(path) and "trust_file" not in report
    data = tomllib.loads(path.read_text())
    assert "state" not in data["hooks"]
    assert data["allowed_approval_policies"] == ["never"]
    assert "allow_managed_hooks_only" not in data
    (group,) = data["hooks"]["PreToolUse"]
    assert group["hooks"][0]["command"].startswith(f"{HOOKBUS} codex hook --timeout 610 || printf")
    managed("codex", "install", tmp_path, "--allow-managed-hooks-only")
    assert tomllib.loads(path.read_text())["allow_managed_hooks_only"] is True
    assert not (tmp_path / "home" / ".codex" / "config.toml").exists()
    managed("codex", "install", tmp_path, "--no-allow-managed-hooks-only")
    managed("codex", "uninstall", tmp_path)
    assert tomllib.loads(path.read_text()) == {
        "allowed_approval_policies": ["never"],
        "allow_managed_hooks_only": False,
    }


def test_gemini_managed_scope_is_the_system_settings(tmp_path: Path) -> None:
    managed("gemini-cli", "install", tmp_path)
    path = tmp_path / "etc" / "gemini-cli" / "settings.json"
    assert "BeforeTool" in json.loads(path.read_text())["hooks"]
    assert path.stat().st_mode & 0o777 == 0o644
    managed("gemini-cli", "uninstall", tmp_path)
    assert json.loads(path.read_text()) == {}
    moved = tmp_path / "system.json"
    done = hookbus(
        "gemini-cli",
        "install",
        "--scope",
        "managed",
        "--command",
        HOOKBUS,
        home=tmp_path,
        env={"GEMINI_CLI_SYSTEM_SETTINGS_PATH": str(moved)},
    )
    assert done.returncode == 0, done.stderr
    assert "BeforeTool" in json.loads(moved.read_text())["hooks"]


@pytest.mark.parametrize("cli", ["claude-code", "codex", "gemini-cli"])
def test_root_without_the_managed_scope_is_a_usage_error(cli: str, tmp_path: Path) -> None:
    done = hookbus(cli, "install", "--root", str(tmp_path), home=tmp_path)
    assert done.returncode == 64
    assert "only with --scope managed" in done.stderr
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("cli", ["claude-code", "codex"])
def test_allow_managed_hooks_only_outside_the_managed_scope_is_refused(
    cli: str, tmp_path: Path
) -> None:
    done = hookbus(cli, "install", "--allow-managed-hooks-only", home=tmp_path)
    assert done.returncode == 1
    assert "--scope managed" in done.stderr
    assert not any(p for p in tmp_path.rglob("*") if p.is_file())


def test_without_root_the_managed_scope_names_the_system_file(tmp_path: Path) -> None:
    existed = Path("/etc/claude-code").exists()
    done = hookbus("claude-code", "install", "--scope", "managed", "--dry-run", home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "/etc/claude-code/managed-settings.json (after)" in done.stdout
    assert "dry run: would have installed hookbus into /etc/claude-code/managed-settings.json" in (
        done.stdout
    )
    assert Path("/etc/claude-code").exists() == existed
