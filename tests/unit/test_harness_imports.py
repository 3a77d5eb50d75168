"""The lean path of ``hookbus claude-code hook``: what a per-event process imports.

Claude Code starts this command once per event, so every import is paid on every tool
call. It must not load the CLI stack, pydantic, redis-py, rq or msgspec (which alone is
two thirds of a bare interpreter's start), and it must dispatch before typer loads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness_helpers import FORBIDDEN

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "claude_code"


# the hook command ends its process with os._exit (no teardown, no atexit): the modules
# are written down there
PROBE = r"""
import json, os, sys
_exit = os._exit
def dump_then_exit(code):
    with open(sys.argv[1], "w") as fh:
        json.dump(sorted(sys.modules), fh)
    _exit(code)
os._exit = dump_then_exit
from hookbus.cli import main
main(["claude-code", "hook"])
"""


def imported_by_the_command(event: str, tmp_path: Path, *, env: dict[str, str]) -> list[str]:
    out = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(out)],
        input=(FIXTURES / f"{event}.json").read_bytes(),
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        cwd=tmp_path,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr.decode()
    modules: list[str] = json.loads(out.read_text())
    return modules


@pytest.mark.parametrize("event", ["PostToolUse", "PreToolUse", "Stop"])
def test_the_hook_command_imports_no_heavy_or_framework_module(event: str, tmp_path: Path) -> None:
    # an unreachable Redis takes every branch of the command up to the socket
    modules = imported_by_the_command(
        event, tmp_path, env={"HOOKBUS_REDIS_URL": "redis://127.0.0.1:1/0"}
    )
    loaded = [
        name
        for name in modules
        if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN)
    ]
    assert loaded == []
    assert "hookbus.harnesses.lean.hook" in modules


def test_a_config_file_is_read_with_tomllib_only_when_there_is_one(tmp_path: Path) -> None:
    (tmp_path / "hookbus.toml").write_text('redis_url = "redis://127.0.0.1:1/0"\n')
    modules = imported_by_the_command("PostToolUse", tmp_path, env={})
    assert "tomllib" in modules
    assert "hookbus.bus.settings.loader" not in modules


def test_importtime_lists_no_forbidden_module(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "hookbus", "claude-code", "hook"],
        input=(FIXTURES / "PreToolUse.json").read_bytes(),
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "HOOKBUS_REDIS_URL": "redis://127.0.0.1:1/0"},
        cwd=tmp_path,
        timeout=30,
    )
    names = [
        line.rsplit("|", 1)[-1].strip()
        for line in done.stderr.decode().splitlines()
        if line.startswith("import time:")
    ]
    assert "hookbus.harnesses.lean.msgpack" in names
    assert not [
        n
        for n in names
        if n.split(".")[0] in {"redis", "typer", "rich", "pydantic", "rq", "msgspec"}
    ]
    # stdout is the deny, as JSON, even with importtime's report on stderr
    assert json.loads(done.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
