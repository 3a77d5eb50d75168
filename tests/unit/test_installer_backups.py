"""Installers keep a settings file's mode and owner, for the file and its backup (a 0600
file holding an API key must not leak through a 0644 backup), keep the first pre-install
copy (an uninstall or a second install never overwrites it), and print one summary line:
the diff only with ``--verbose`` or ``--dry-run``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hookbus.harnesses.install.settings_file import BACKUP_SUFFIX

ROOT = Path(__file__).resolve().parents[2]
HOOKBUS = "/opt/hookbus/bin/hookbus"
#: Somebody else's ids: the installer (root here) must give the file back to its owner.
OTHER_UID = OTHER_GID = 65534

ORIGINALS = {
    "claude-code": ("settings.json", '{\n  "env": {"ANTHROPIC_API_KEY": "sk-secret"}\n}\n'),
    "gemini-cli": ("settings.json", '{\n  "security": {"auth": {"apiKey": "secret"}}\n}\n'),
    "codex": ("config.toml", '# mine\nmodel = "gpt-5.4"\nexperimental_bearer = "secret"\n'),
}


def _hookbus(cli: str, path: Path, home: Path, *args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "hookbus", cli, *args, "--settings", str(path)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(home)},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.parametrize("cli", sorted(ORIGINALS))
def test_a_private_file_and_its_backup_keep_mode_and_owner_and_the_first_copy_stays(
    cli: str, tmp_path: Path
) -> None:
    name, original = ORIGINALS[cli]
    path = tmp_path / "conf" / name
    path.parent.mkdir()
    path.write_text(original)
    os.chmod(path, 0o600)
    chown = os.geteuid() == 0
    if chown:
        os.chown(path, OTHER_UID, OTHER_GID)
    backup = path.with_name(name + BACKUP_SUFFIX)

    (line,) = _hookbus(cli, path, tmp_path, "install", "--command", HOOKBUS)
    assert str(path) in line and str(backup) in line, line
    installed = path.read_text()
    assert installed != original and backup.read_text() == original
    for file in (path, backup):
        assert file.stat().st_mode & 0o777 == 0o600, (file, oct(file.stat().st_mode))
        if chown:
            assert (file.stat().st_uid, file.stat().st_gid) == (OTHER_UID, OTHER_GID), file

    (line,) = _hookbus(cli, path, tmp_path, "uninstall")
    assert str(path) in line, line
    assert backup.read_text() == original  # the pre-install copy, not the installed file
    _hookbus(cli, path, tmp_path, "install", "--command", HOOKBUS)
    assert backup.read_text() == original
    assert backup.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("cli", sorted(ORIGINALS))
def test_the_diff_is_printed_only_with_verbose_or_dry_run(cli: str, tmp_path: Path) -> None:
    name, original = ORIGINALS[cli]
    path = tmp_path / name
    path.write_text(original)

    dry = _hookbus(cli, path, tmp_path, "install", "--command", HOOKBUS, "--dry-run")
    assert f"+++ {path} (after)" in dry and path.read_text() == original
    assert dry[-1].startswith("dry run:") and str(path) in dry[-1], dry[-1]
    verbose = _hookbus(cli, path, tmp_path, "install", "--command", HOOKBUS, "--verbose")
    assert f"+++ {path} (after)" in verbose and str(path) in verbose[-1]
    (again,) = _hookbus(cli, path, tmp_path, "install", "--command", HOOKBUS)
    assert "already installed" in again and str(path) in again
