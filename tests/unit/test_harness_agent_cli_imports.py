"""The lean path of ``hookbus <cli> hook`` (Gemini CLI, Codex, Copilot CLI, Qwen Code):
dispatched before typer loads, importing none of the heavy or framework modules (the list of
:mod:`tests.unit.test_harness_imports`), and finding the user's hookbus.toml without
``HOOKBUS_*`` variables (Gemini CLI strips them under ``GITHUB_SHA``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hookbus.harnesses.lean.user_config import user_config_file, with_user_config
from tests.unit.test_harness_imports import FORBIDDEN

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"

PROBE = r"""
import atexit, json, sys
def dump():
    with open(sys.argv[1], "w") as fh:
        json.dump(sorted(sys.modules), fh)
atexit.register(dump)
from hookbus.cli import main
main([sys.argv[2], "hook"])
"""

CASES = [
    ("gemini-cli", "gemini_cli", "BeforeTool"),
    ("gemini-cli", "gemini_cli", "AfterTool"),
    ("codex", "codex", "PreToolUse"),
    ("codex", "codex", "PostToolUse"),
    ("copilot", "copilot", "PreToolUse"),
    ("copilot", "copilot", "PermissionRequest"),
    ("qwen-code", "qwen_code", "PreToolUse"),
    ("qwen-code", "qwen_code", "PostToolUse"),
]


@pytest.mark.parametrize(("cli", "folder", "event"), CASES)
def test_the_hook_command_imports_no_heavy_or_framework_module(
    cli: str, folder: str, event: str, tmp_path: Path
) -> None:
    out = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(out), cli],
        input=(FIXTURES / folder / f"{event}.json").read_bytes(),
        capture_output=True,
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "HOOKBUS_REDIS_URL": "redis://127.0.0.1:1/0",
            "HOME": str(tmp_path),
        },
        cwd=tmp_path,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr.decode()
    modules = json.loads(out.read_text())
    loaded = [m for m in modules if any(m == bad or m.startswith(bad + ".") for bad in FORBIDDEN)]
    assert loaded == []
    assert "hookbus.harnesses.lean.hook" in modules
    assert "hookbus.cli.root" not in modules


def test_the_users_config_dir_is_used_only_when_nothing_closer_names_a_file(
    tmp_path: Path,
) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    env = {"HOME": str(home)}
    assert with_user_config({}, env, str(project)) == {}
    user = home / ".config" / "hookbus" / "hookbus.toml"
    user.parent.mkdir(parents=True)
    user.write_text('redis_url = "redis://10.0.0.1:6379/0"\n')
    assert user_config_file(env) == str(user)
    assert with_user_config({}, env, str(project)) == {"config": str(user)}
    assert with_user_config({"config": "x.toml"}, env, str(project)) == {"config": "x.toml"}
    assert with_user_config({}, {**env, "HOOKBUS_CONFIG": "y.toml"}, str(project)) == {}
    (project / "hookbus.toml").write_text("")
    assert with_user_config({}, env, str(project)) == {}
    xdg = tmp_path / "xdg" / "hookbus" / "hookbus.toml"
    xdg.parent.mkdir(parents=True)
    xdg.write_text("")
    assert user_config_file({**env, "XDG_CONFIG_HOME": str(tmp_path / "xdg")}) == str(xdg)


def test_with_only_path_and_home_the_hook_reaches_the_redis_of_the_users_config(
    tmp_path: Path,
) -> None:
    user = tmp_path / ".config" / "hookbus" / "hookbus.toml"
    user.parent.mkdir(parents=True)
    user.write_text('redis_url = "redis://127.0.0.1:2/0"\n')
    done = subprocess.run(
        [sys.executable, "-m", "hookbus", "gemini-cli", "hook"],
        input=(FIXTURES / "gemini_cli" / "BeforeTool.json").read_bytes(),
        capture_output=True,
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)},
        cwd=tmp_path,
        timeout=30,
    )
    assert done.returncode == 0
    # the deny names the user's configured Redis, not the default one
    assert "redis://127.0.0.1:2/0" in json.loads(done.stdout)["reason"]
