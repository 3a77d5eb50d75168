"""An installer refuses a CLI whose version would let every guarded call run whenever
hookbus cannot start (Claude Code before the entries' ``onFailure``): the version of the
binary found on PATH is asked, as ``hookbus doctor`` asks it; ``--force`` installs with a
warning; a version that honours ``onFailure``, or no binary at all, installs as before."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hookbus.harnesses.adapters import adapter

ROOT = Path(__file__).resolve().parents[2]
SINCE = adapter("claude-code").on_failure_since


def fake_claude(folder: Path, version: str) -> Path:
    """A ``claude`` that says ``version`` to ``--version``, as the real one does."""
    folder.mkdir(parents=True, exist_ok=True)
    binary = folder / "claude"
    binary.write_text(f"#!/bin/sh\necho '{version} (Claude Code)'\n")
    binary.chmod(0o755)
    return folder


def install(tmp_path: Path, path_dirs: list[Path], *extra: str) -> subprocess.CompletedProcess[str]:
    settings = tmp_path / "settings.json"
    return subprocess.run(
        [sys.executable, "-m", "hookbus", "claude-code", "install", "--settings", str(settings),
         "--command", "/opt/hookbus/bin/hookbus", *extra],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "HOME": str(tmp_path),
             "PATH": ":".join([*map(str, path_dirs), "/usr/bin", "/bin"])},
        timeout=60,
    )  # fmt: skip


def test_a_claude_code_older_than_on_failure_is_refused_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    done = install(tmp_path, [fake_claude(tmp_path / "bin", "2.1.197")])
    assert done.returncode == 1, done.stdout
    assert f"Claude Code 2.1.197 ({tmp_path / 'bin' / 'claude'}) ignores onFailure" in done.stderr
    assert f"Upgrade Claude Code to {SINCE} or later" in done.stderr and "--force" in done.stderr
    assert not (tmp_path / "settings.json").exists()


def test_force_installs_it_with_a_warning(tmp_path: Path) -> None:
    done = install(tmp_path, [fake_claude(tmp_path / "bin", "2.1.197")], "--force")
    assert done.returncode == 0, done.stderr
    assert "WARNING: Claude Code 2.1.197" in done.stderr and "installing anyway" in done.stderr
    assert json.loads((tmp_path / "settings.json").read_text())["hooks"]


@pytest.mark.parametrize("found", ["2.1.331", None], ids=["new-enough", "not-on-path"])
def test_a_version_that_honours_on_failure_or_no_binary_installs(
    tmp_path: Path, found: str | None
) -> None:
    dirs = [fake_claude(tmp_path / "bin", found)] if found else []
    done = install(tmp_path, dirs)
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr
    assert json.loads((tmp_path / "settings.json").read_text())["hooks"]
