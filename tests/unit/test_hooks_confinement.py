"""Issue 13 rows 6 and 7: a shell hook cannot read the worker's secrets through /proc, and
every process it starts (setsid, double forks, nohup) dies with its run."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hookbus.bus.wire import Event
from hookbus.hooks.actions.confine import confinement
from hookbus.hooks.manifest import parse_toml
from hookbus.hooks.registry import HookRegistry


def _pids_with(token: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                if token.encode() in fh.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


@pytest.fixture
def token() -> Iterator[str]:
    value = f"hookbus-orphan-{uuid.uuid4().hex}"
    yield value
    for pid in _pids_with(value):  # never leave a survivor behind, whatever the outcome
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _run_hook(tmp_path: Path, script: str, timeout: float = 5) -> str:
    folder = tmp_path / "detach"
    folder.mkdir()
    (folder / "run.sh").write_text(script)
    manifest = parse_toml(
        'name = "detach"\nevents = ["PreToolUse"]\n'
        f'[action.shell]\ncommand = "sh run.sh"\ntimeout_secs = {timeout}\n',
        folder / "HOOK.toml",
    )
    registry = HookRegistry()
    registry.register_manifest(manifest)
    decision = registry.run(Event(kind="PreToolUse", payload={}, agent_id="a1"))
    return decision.trace[0].outcome


def _unconfined_here() -> bool:
    """On a machine that allows neither a PID nor a user namespace to this user, the
    guarantee cannot hold: what must hold instead is that the worker says so (issue 13, "Done
    when"). The other branch, run on this project's machine, checks the guarantee itself."""
    mode = confinement()
    if mode.startswith("none"):
        assert "may outlive its run" in mode
        return True
    return False


def _gone(token: str, within_s: float = 3.0) -> bool:
    deadline = time.monotonic() + within_s
    while _pids_with(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _pids_with(token)


def test_setsid_double_fork_and_nohup_children_die_when_the_hook_returns(
    tmp_path: Path, token: str
) -> None:
    script = textwrap.dedent(
        f"""\
        setsid sh -c 'sleep 1000; : {token}-setsid' >/dev/null 2>&1 &
        (sh -c 'sleep 1000; : {token}-double' >/dev/null 2>&1 &) &
        nohup sh -c 'sleep 1000; : {token}-nohup' >/dev/null 2>&1 &
        sleep 0.2
        exit 0
        """
    )
    assert _run_hook(tmp_path, script) == "continue"
    if _unconfined_here():
        return
    assert _gone(token), _pids_with(token)


def test_a_detached_child_dies_when_the_hook_is_killed_at_its_timeout(
    tmp_path: Path, token: str
) -> None:
    script = f"setsid sh -c 'sleep 1000; : {token}' >/dev/null 2>&1 &\nsleep 1000\n"
    started = time.monotonic()
    assert _run_hook(tmp_path, script, timeout=0.5) == "timeout"
    assert time.monotonic() - started < 3
    if _unconfined_here():
        return
    assert _gone(token)


WORKER = """
import sys
from pathlib import Path
from hookbus.bus.wire import Event
from hookbus.hooks.manifest import parse_toml
from hookbus.hooks.registry import HookRegistry

folder = Path(sys.argv[1])
manifest = parse_toml(
    'name = "peek"\\nevents = ["PreToolUse"]\\n[action.shell]\\ncommand = "sh peek.sh"\\n',
    folder / "HOOK.toml",
)
registry = HookRegistry(env_allowlist=("PATH",))
registry.register_manifest(manifest)
print(registry.run(Event(kind="PreToolUse", payload={}, agent_id="a1")).trace[0].outcome)
"""


def test_a_hook_cannot_read_the_workers_secrets_from_proc(tmp_path: Path) -> None:
    secret = f"hunter2-{uuid.uuid4().hex}"
    folder = tmp_path / "peek"
    folder.mkdir()
    found = tmp_path / "found.txt"
    (folder / "peek.sh").write_text(
        # the parent's environ, then every process's: a PID namespace does not hide /proc
        f"cat /proc/$PPID/environ > {found} 2>/dev/null\n"
        f"for f in /proc/[0-9]*/environ; do cat $f 2>/dev/null; done >> {found}\n"
        "exit 0\n"
    )
    env = {
        "PATH": os.environ["PATH"],
        "HOOKBUS_REDIS_URL": f"redis://:{secret}@redis.internal:6379/0",
        "AWS_SECRET_ACCESS_KEY": secret,
    }
    done = subprocess.run(
        [sys.executable, "-c", WORKER, str(folder)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0 and done.stdout.strip() == "continue", done.stderr
    assert found.exists()
    assert secret.encode() not in found.read_bytes()


def test_the_confinement_in_force_is_named() -> None:
    mode = confinement()
    assert mode != "unprobed"
    assert mode.startswith(("pid", "none")), mode


def test_an_agent_written_shell_hook_has_no_network_and_an_operators_has(
    tmp_path: Path,
) -> None:
    import socket as socket_module

    listener = socket_module.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    outcomes = {}
    try:
        for author in ("operator", "agent:a1"):
            folder = tmp_path / author.replace(":", "-")
            folder.mkdir()
            (folder / "dial.py").write_text(
                "import socket, sys\nsys.stdin.read()\n"
                f"socket.create_connection(('127.0.0.1', {port}), timeout=2).close()\n"
            )
            manifest = parse_toml(
                f'name = "dial"\nevents = ["PreToolUse"]\nauthor = "{author}"\n'
                '[action.shell]\ncommand = "python3 dial.py"\n',
                folder / "HOOK.toml",
            )
            registry = HookRegistry()
            registry.register_manifest(manifest)
            trace = registry.run(Event(kind="PreToolUse", payload={}, agent_id="a1")).trace[0]
            outcomes[author] = (trace.outcome, trace.error or "")
    finally:
        listener.close()
    assert outcomes["operator"][0] == "continue", outcomes
    if _unconfined_here():
        return
    assert outcomes["agent:a1"][0] == "error", outcomes
    assert (
        "Network is unreachable" in outcomes["agent:a1"][1]
        or "refused" in (outcomes["agent:a1"][1])
    )


def test_an_agent_written_shell_hook_writes_only_inside_its_own_folder(tmp_path: Path) -> None:
    from hookbus.hooks.actions.confine import agent_confinement, agent_uid

    results = {}
    errors = {}
    for author in ("operator", "agent:a1"):
        folder = tmp_path / author.replace(":", "-")
        folder.mkdir()
        outside = tmp_path / f"outside-{folder.name}.txt"
        (folder / "w.sh").write_text(
            "cat >/dev/null\necho in > inside.txt || exit 4\n"
            f"echo out > {outside} 2>/dev/null || exit 3\n"
        )
        manifest = parse_toml(
            f'name = "w"\nevents = ["PreToolUse"]\nauthor = "{author}"\n'
            '[action.shell]\ncommand = "sh w.sh"\n',
            folder / "HOOK.toml",
        )
        registry = HookRegistry()
        registry.register_manifest(manifest)
        trace = registry.run(Event(kind="PreToolUse", payload={}, agent_id="a1")).trace[0]
        results[author] = (trace.outcome, (folder / "inside.txt").exists(), outside.exists())
        errors[author] = trace.error or ""
    assert results["operator"] == ("continue", True, True), results
    if not agent_confinement().startswith("no network, writes"):
        # where an agent's hook cannot be confined it is refused (security.allow_unconfined_...)
        assert "cannot be confined" in errors["agent:a1"], errors
        assert results["agent:a1"] == ("error", False, False), results
        return
    # the write inside succeeded (else exit 4), the one outside did not (exit 3); a root
    # worker's agent hook wrote into its private per-run copy of the folder, which is gone
    assert "exit code 3" in errors["agent:a1"], errors
    assert results["agent:a1"] == ("error", agent_uid() is None, False), results
