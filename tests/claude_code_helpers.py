"""Helpers shared by ``test_claude_code_binary.py``, ``test_claude_code_hook.py`` and the test
modules that need the same set-up (a test module never imports another)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis

from hookbus.bus import keys
from tests.blocking_helpers import wait_for
from tests.redis_cleanup_helpers import delete_namespace

ROOT = Path(__file__).resolve().parents[1]


HOOKBUS = [sys.executable, "-m", "hookbus"]


def gateway_env(url: str, ns: str, home: Path) -> dict[str, str]:
    return dict(
        os.environ,
        HOME=str(home),
        PYTHONPATH=str(ROOT),
        HOOKBUS_REDIS_URL=url,
        HOOKBUS_NAMESPACE=ns,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_AUTOUPDATER="1",
        ANTHROPIC_API_KEY="sk-ant-fake-key-for-tests",
    )


def free_gateway_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def running_gateway(env: dict[str, str]) -> Iterator[str]:
    port = free_gateway_port()
    proc = subprocess.Popen(
        [*HOOKBUS, "gateway", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def up() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return True
        except OSError:
            assert proc.poll() is None, "the gateway exited"
            return False

    try:
        wait_for(up, what="the gateway")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def gateway(real_redis_url: str, namespace: str, tmp_path: Path) -> Iterator[str]:
    with running_gateway(gateway_env(real_redis_url, namespace, tmp_path)) as url:
        yield url


FIXTURES = ROOT / "tests" / "fixtures" / "claude_code"


WORKER_CODE = r"""
import json, sys, threading, time
from hookbus.bus.wire import HookResult
from hookbus.bus.settings.loader import load_settings
from hookbus.hooks.registry import HookRegistry
from hookbus.workers.chain.worker import run_chain_worker
from hookbus.workers.fleet.signals import graceful_signals

url, ns = sys.argv[1], sys.argv[2]
settings = load_settings(overrides={"redis_url": url, "namespace": ns}).settings
registry = HookRegistry.from_settings(settings)

def scripted(event):
    text = json.dumps(event.payload)
    where = f"{event.kind} of {event.session_id}"
    if "HOOKBUS_FOR_" in text and f"HOOKBUS_FOR_{event.kind}" not in text:
        return None  # the markers are meant for another kind
    if "HOOKBUS_SLEEP" in text:
        time.sleep(1.5)
    if "HOOKBUS_DENY" in text:
        return HookResult(outcome="deny", reason=f"denied by the fleet: {where}")
    if "HOOKBUS_ASK" in text:
        return HookResult(outcome="ask", reason=f"a person must look: {where}")
    if "HOOKBUS_HALT" in text:
        return HookResult(outcome="halt", reason=f"halted: {where}")
    if "HOOKBUS_REWRITE" in text:
        return HookResult(updated={"tool_input": {"command": "ls -la"}})
    if "HOOKBUS_CONTEXT" in text:
        return HookResult(context=[f"context from the fleet for {where}"])
    return None

registry.register(
    "scripted", scripted, isolate=True, timeout_s=5,
    events=["PreToolUse", "PermissionRequest", "PromptSubmit", "Stop", "SubagentStop",
            "PreCompact", "PreModelSwitch", "SessionStart"],
)
stop = threading.Event()
with graceful_signals(stop):
    run_chain_worker(settings, registry=registry, stop_event=stop)
"""


def fixture(name: str, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    data.update(changes)
    return data


@pytest.fixture(scope="module")
def fleet(real_redis_url: str) -> Iterator[tuple[str, str]]:
    """One chain worker for the module, in a namespace of its own: (url, namespace)."""
    ns = f"cc{uuid.uuid4().hex[:10]}"
    client = redis.Redis.from_url(real_redis_url, protocol=2)
    delete_namespace(client, ns)
    proc = start_worker(real_redis_url, ns)
    try:
        wait_for(
            lambda: proc.poll() is None and client.hlen(keys.workers(ns)) > 0,
            what="the chain worker's heartbeat",
        )
        yield real_redis_url, ns
    finally:
        stop_worker(proc)
        delete_namespace(client, ns)
        client.close()


def start_worker(url: str, ns: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-c", WORKER_CODE, url, ns],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: freeze() reaches forked children
    )


def stop_worker(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGCONT)  # a stopped process cannot act on SIGTERM
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def run_hook(data: dict[str, Any] | bytes, url: str, ns: str, *args: str) -> tuple[int, Any, str]:
    """Run the command as Claude Code does; (exit code, parsed stdout or None, stderr)."""
    env = dict(os.environ, HOOKBUS_REDIS_URL=url, HOOKBUS_NAMESPACE=ns, PYTHONPATH=str(ROOT))
    stdin = data if isinstance(data, bytes) else json.dumps(data).encode()
    done = subprocess.run(
        [sys.executable, "-m", "hookbus", "claude-code", "hook", *args],
        input=stdin,
        capture_output=True,
        env=env,
        cwd=ROOT / "tests",
        timeout=30,
    )
    out = done.stdout.decode()
    # stdout is valid JSON or empty, always: Claude Code lets a tool run on anything else
    parsed = json.loads(out) if out.strip() else None
    return done.returncode, parsed, done.stderr.decode()
