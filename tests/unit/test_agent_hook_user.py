"""Issue 13 row 6: a worker running as root runs agent-written hooks as an unprivileged user
(``nobody``), so a hook cannot use root's rights on the host's files; an operator's hook
keeps the worker's user. This project's VM runs its tests as root, which checks the
guarantee itself; elsewhere the worker is already unprivileged and both keep its uid."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hookbus.bus.settings.loader import load_settings
from hookbus.bus.wire import Event
from hookbus.hooks.actions import confine
from hookbus.hooks.manifest import parse_toml
from hookbus.hooks.registry import HookRegistry


def _reason(tmp_path: Path, author: str, command: str, script: str, name: str) -> str:
    folder = tmp_path / f"{name}-{author.replace(':', '-')}"
    folder.mkdir()
    (folder / name).write_text(script)
    manifest = parse_toml(
        f'name = "who"\nevents = ["PreToolUse"]\nauthor = "{author}"\n'
        f'[action.shell]\ncommand = "{command}"\n',
        folder / "HOOK.toml",
    )
    registry = HookRegistry()
    registry.register_manifest(manifest)
    decision = registry.run(Event(kind="PreToolUse", payload={}, agent_id="a1"))
    assert decision.outcome == "deny", decision.trace  # the hook denies with its uid
    return decision.reason or ""


SHELL = (
    "cat >/dev/null\n"
    'echo "uid=$(id -u) shadow=$(cat /etc/shadow >/dev/null 2>&1 && echo read)" >&2\n'
    "exit 2\n"
)
PYTHON = "import os, sys\nsys.stdin.read()\nsys.stderr.write('uid=%d' % os.getuid())\nsys.exit(2)\n"


def test_an_agent_hook_of_a_root_worker_runs_as_nobody_and_an_operators_as_root(
    tmp_path: Path,
) -> None:
    agent = _reason(tmp_path, "agent:a1", "sh who.sh", SHELL, "who.sh")
    operator = _reason(tmp_path, "operator", "sh who.sh", SHELL, "who.sh")

    if os.geteuid() != 0:  # an unprivileged worker: nothing to drop, both keep its user
        assert confine.agent_uid() is None
        assert agent.split()[0] == operator.split()[0]
        return
    uid = confine.agent_uid()
    assert uid is not None and uid != 0
    assert operator.startswith("uid=0 ")  # the worker's own user, unchanged
    assert agent == f"uid={uid} shadow=", agent  # not root, and root's files stay closed
    assert "shadow=read" in operator or not os.path.exists("/etc/shadow")


def test_an_agent_python_script_hook_of_a_root_worker_runs_as_nobody(tmp_path: Path) -> None:
    agent = _reason(tmp_path, "agent:a1", "python3 who.py", PYTHON, "who.py")
    operator = _reason(tmp_path, "operator", "python3 who.py", PYTHON, "who.py")

    if os.geteuid() != 0:
        assert agent == operator
        return
    assert operator == "uid=0"
    assert agent == f"uid={confine.agent_uid()}"


def test_the_agent_confinement_names_the_user_a_root_worker_runs_agent_hooks_as() -> None:
    mode = confine.agent_confinement()

    if os.geteuid() == 0 and mode.startswith(confine.AGENT_CONFINED):
        assert f"as uid {confine.agent_uid()} (nobody)" in mode
    else:
        assert "as uid" not in mode


def test_the_probe_does_not_depend_on_the_workers_working_directory(tmp_path: Path) -> None:
    # a worker started in a folder under /tmp (as `hookbus dev` in a test folder is) must
    # find the same confinement as one started elsewhere: the probe runs in its scratch
    code = "from hookbus.hooks.actions import confine; print(confine.agent_confinement())"
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == confine.agent_confinement()


@pytest.fixture
def agent_user() -> Iterator[Callable[[str], None]]:
    """Set security.agent_hook_user for one test, back to the default after it."""
    yield confine.configure_agent_user
    confine.configure_agent_user(confine.AGENT_USER)


def test_a_configured_agent_hook_user_is_the_one_a_root_workers_agent_hooks_run_as(
    tmp_path: Path, agent_user: Callable[[str], None]
) -> None:
    agent_user("4321")  # a numeric uid needs no passwd entry

    agent = _reason(tmp_path, "agent:a1", "sh who.sh", SHELL, "who.sh")

    if os.geteuid() != 0:
        assert confine.agent_uid() is None and agent.startswith("uid=0 ")  # its user namespace
        return
    assert agent == "uid=4321 shadow=", agent


@pytest.mark.parametrize("name", ["root", "0", "no-such-user-hookbus"])
def test_root_or_an_unknown_agent_hook_user_refuses_agent_hooks_instead(
    tmp_path: Path, agent_user: Callable[[str], None], name: str
) -> None:
    agent_user(name)

    registry_reason = _refused_or_ran(tmp_path)

    if os.geteuid() != 0:
        assert registry_reason == "ran"
        return
    assert "cannot be confined" in registry_reason
    assert "security.agent_hook_user" in registry_reason


def _refused_or_ran(tmp_path: Path) -> str:
    folder = tmp_path / "h"
    folder.mkdir()
    (folder / "run.sh").write_text("cat >/dev/null\necho ran >&2\nexit 2\n")
    manifest = parse_toml(
        'name = "h"\nevents = ["PreToolUse"]\nauthor = "agent:a1"\n'
        '[action.shell]\ncommand = "sh run.sh"\n',
        folder / "HOOK.toml",
    )
    registry = HookRegistry()
    registry.register_manifest(manifest)
    run = registry.run(Event(kind="PreToolUse", payload={}, agent_id="a1"))
    return run.reason if run.trace[0].outcome == "deny" else (run.trace[0].error or "")


def test_the_agent_hook_user_is_a_setting_read_from_the_environment() -> None:
    default = load_settings(environ={}, warn=False).settings
    named = load_settings(
        environ={"HOOKBUS_SECURITY__AGENT_HOOK_USER": "hookbus-agents"}, warn=False
    ).settings

    assert default.security.agent_hook_user == "nobody"
    assert named.security.agent_hook_user == "hookbus-agents"
