"""Helpers for the lean-path tests: a real chain worker whose answer the event selects, and
``hookbus <cli> hook`` run as an agent CLI runs it (a process per event), optionally under
``faketime`` or with a private home.

A test module imports these; no test module imports another.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.cluster

from hookbus.bus import keys

ROOT = Path(__file__).resolve().parents[1]

#: A chain worker answering ``deny`` with a reason naming the event when its payload holds
#: ``HOOKBUS_DENY``; argv: URL, namespace.
WORKER_CODE = r"""
import json, sys, threading
from hookbus.bus.wire import HookResult
from hookbus.bus.settings.loader import load_settings
from hookbus.hooks.registry import HookRegistry
from hookbus.workers.chain.worker import run_chain_worker
from hookbus.workers.fleet.signals import graceful_signals

url, ns = sys.argv[1], sys.argv[2]
settings = load_settings(overrides={"redis_url": url, "namespace": ns}).settings
registry = HookRegistry.from_settings(settings)

def scripted(event):
    if "HOOKBUS_DENY" in json.dumps(event.payload):
        return HookResult(outcome="deny", reason=f"denied by the fleet: {event.kind}")
    return None

registry.register("scripted", scripted, isolate=False, timeout_s=5, events=["PreToolUse"])
stop = threading.Event()
with graceful_signals(stop):
    run_chain_worker(settings, registry=registry, stop_event=stop)
"""


def wait_for(condition: Callable[[], Any], timeout_s: float = 20.0, what: str = "") -> Any:
    """Poll ``condition`` until truthy; fail the test after ``timeout_s``."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    pytest.fail(f"timed out after {timeout_s} s waiting for {what or condition}")


def start_worker(
    url: str, ns: str, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """A chain worker process in its own process group (see :data:`WORKER_CODE`)."""
    full = dict(os.environ if env is None else env, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-c", WORKER_CODE, url, ns],
        env=full,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def stop_worker(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGCONT)
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


@contextlib.contextmanager
def chain_worker(
    url: str, ns: str, client: redis.Redis | redis.cluster.RedisCluster
) -> Iterator[subprocess.Popen[bytes]]:
    """A running chain worker whose heartbeat is in the workers hash."""
    proc = start_worker(url, ns)
    try:
        wait_for(
            lambda: proc.poll() is None and client.hlen(keys.workers(ns)) > 0,
            what="the chain worker's heartbeat",
        )
        yield proc
    finally:
        stop_worker(proc)


def pre_tool_use(command: str, session: str = "s-lean") -> dict[str, Any]:
    """A Claude Code PreToolUse hook input for a Bash command."""
    return {
        "session_id": session,
        "transcript_path": "/tmp/t.jsonl",
        "cwd": "/tmp",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
    }


def faketime_binary() -> str:
    """``faketime`` (libfaketime); .ci/run installs it. Missing: the test cannot be made."""
    found = shutil.which("faketime")
    if found is None:
        pytest.skip("faketime is not installed (apt-get install -y faketime; .ci/run does)")
    return found


def private_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment minus every ``HOOKBUS_*`` variable, with HOME and the XDG folders
    under ``home``: nothing is read from or written to the real home."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_RUNTIME_DIR=str(home / "run"),
        PYTHONPATH=str(ROOT),
    )
    (home / "run").mkdir(parents=True, exist_ok=True, mode=0o700)
    env.update(extra)
    return env


def run_hook(
    data: Mapping[str, Any],
    env: Mapping[str, str],
    *,
    cli: str = "claude-code",
    prefix: tuple[str, ...] = (),
    cwd: Path | None = None,
    timeout: float = 30,
) -> tuple[int, Any, str]:
    """``hookbus <cli> hook`` as the agent CLI runs it: (exit code, stdout JSON, stderr)."""
    done = subprocess.run(
        [*prefix, sys.executable, "-m", "hookbus", cli, "hook"],
        input=json.dumps(data).encode(),
        capture_output=True,
        env=dict(env),
        cwd=cwd or ROOT / "tests",
        timeout=timeout,
    )
    out = done.stdout.decode()
    return done.returncode, (json.loads(out) if out.strip() else None), done.stderr.decode()


def readme_python_example() -> str:
    """The README's Python snippet, as written."""
    import re

    text = (ROOT / "README.md").read_text()
    section = text[text.index("## From Python") :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "README has no python example under 'From Python'"
    return match.group(1)


@contextlib.contextmanager
def hookbus_dev(
    folder: Path, env: Mapping[str, str], *args: str
) -> Iterator[subprocess.Popen[str]]:
    """``hookbus [args] dev`` running in ``folder`` until the block ends (Ctrl-C then)."""
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("hookbus")), *args],
        cwd=folder,
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if "Press Ctrl-C" in line:
                break
        assert proc.poll() is None, "".join(lines)
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)
        proc.stdout.close()
