"""The lean path of ``hookbus <cli> hook`` (Gemini CLI, Codex, Copilot CLI, Qwen Code):
dispatched before typer loads, importing none of the heavy or framework modules (the list of
:mod:`tests.unit.test_harness_imports`), and finding the configuration as every entry point
does, the user's hookbus.toml included, without ``HOOKBUS_*`` variables (Gemini CLI strips
them under ``GITHUB_SHA``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hookbus.bus.settings.loader import load_settings
from hookbus.harnesses.lean.config import load
from tests.harness_helpers import FORBIDDEN

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"

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
    ("cline", "cline", "PreToolUse"),
    ("cline", "cline", "PostToolUse"),
    ("opencode", "opencode", "tool.execute.before"),
    ("opencode", "opencode", "tool.execute.after"),
    ("kilo", "kilo", "tool.execute.before"),
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


def test_every_reader_ranks_the_users_file_below_a_dev_the_project_and_the_environment(
    tmp_path: Path,
) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    env = {"HOME": str(home), "HOOKBUS_DEV_STATE": str(tmp_path / "no-dev.json")}

    def both(environ: dict[str, str]) -> tuple[tuple[str, str], tuple[str, str]]:
        lean = load(environ, cwd=str(project / "sub"))
        full = load_settings(environ=environ, cwd=project / "sub", warn=False).settings
        return (lean.redis_url, lean.namespace), (full.effective_redis_url, full.namespace)

    user = home / ".config" / "hookbus" / "hookbus.toml"
    user.parent.mkdir(parents=True)
    user.write_text('redis_url = "redis://user:1/0"\nnamespace = "user-ns"\n')
    assert both(env) == (("redis://user:1/0", "user-ns"),) * 2
    dev = tmp_path / "dev.json"
    dev.write_text(json.dumps({"redis_url": "redis://dev:2/0", "pid": os.getpid()}))
    with_dev = {**env, "HOOKBUS_DEV_STATE": str(dev)}
    assert both(with_dev) == (("redis://dev:2/0", "user-ns"),) * 2
    # the project's file, found from a sub-folder, over the dev and the user's file
    (project / "hookbus.toml").write_text('namespace = "project-ns"\n')
    assert both(with_dev) == (("redis://dev:2/0", "project-ns"),) * 2
    assert both({**with_dev, "HOOKBUS_NAMESPACE": "env-ns"}) == (("redis://dev:2/0", "env-ns"),) * 2
    xdg = tmp_path / "xdg" / "hookbus" / "hookbus.toml"
    xdg.parent.mkdir(parents=True)
    xdg.write_text('redis_url = "redis://xdg:3/0"\n')
    assert both({**env, "XDG_CONFIG_HOME": str(tmp_path / "xdg")})[0] == (
        "redis://xdg:3/0",
        "project-ns",
    )


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
