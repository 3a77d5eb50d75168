"""Shared parts of the approval inbox tests: a chain worker process whose guard asks (and
routes every ask to the operator), waiting for an item to be parked, and the CLI."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from hookbus.approvals.inbox import ApprovalInbox
from hookbus.approvals.model import ApprovalItem
from hookbus.bus import keys
from hookbus.bus.settings.loader import Settings

ROOT = Path(__file__).resolve().parents[1]

#: A chain worker: the guard answers ``ask`` when the payload says ``act = "ask"`` (or a
#: command containing ``ASK_ME``), ``deny`` for ``act = "deny"``; every ask goes to the
#: operator (``approvals.route``), who has ``wait_s`` seconds.
WORKER_CODE = r"""
import json, sys, threading
from hookbus.bus.wire import HookResult
from hookbus.bus.settings.loader import Settings
from hookbus.bus.settings.sections import ApprovalSettings, SecuritySettings
from hookbus.hooks.registry import HookRegistry
from hookbus.workers.chain.worker import run_chain_worker
from hookbus.workers.fleet.signals import graceful_signals

url, ns, wait_s, partitions, notify = sys.argv[1:6]
settings = Settings(
    redis_url=url,
    namespace=ns,
    partitions=int(partitions),
    approvals=ApprovalSettings(
        route="operator", wait_s=int(wait_s), notify_url=notify or None,
        console_url="http://127.0.0.1:8788",
    ),
    security=SecuritySettings(http_allowlist=tuple(sys.argv[6:])),
)
registry = HookRegistry.from_settings(settings)

def guard(event):
    text = json.dumps(event.payload)
    if event.payload.get("act") == "ask" or "ASK_ME" in text:
        return HookResult(outcome="ask", reason="a person must look at this")
    if event.payload.get("act") == "deny":
        return HookResult(outcome="deny", reason="never")
    return None

registry.register("guard", guard, events=["PreToolUse", "PermissionRequest"], priority=10)
stop = threading.Event()
with graceful_signals(stop):
    run_chain_worker(settings, registry=registry, stop_event=stop)
"""


def start_worker(
    url: str,
    ns: str,
    *,
    wait_s: int = 30,
    partitions: int = 1,
    notify_url: str = "",
    allow_hosts: tuple[str, ...] = (),
) -> subprocess.Popen[bytes]:
    """A chain worker process in its own process group (SIGKILL reaches its children)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    args = [url, ns, str(wait_s), str(partitions), notify_url, *allow_hosts]
    return subprocess.Popen(
        [sys.executable, "-c", WORKER_CODE, *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def wait_for(condition: Callable[[], Any], timeout_s: float = 15.0, what: str = "") -> Any:
    """Poll ``condition`` until truthy; AssertionError after ``timeout_s``."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what or condition}")


def wait_alive(client: redis.Redis, ns: str, proc: subprocess.Popen[bytes]) -> None:
    def up() -> bool:
        assert proc.poll() is None, f"the worker exited with {proc.returncode}"
        return bool(client.hlen(keys.workers(ns)))

    wait_for(up, what="the chain worker's heartbeat")


def kill_worker(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the worker and everything it forked."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)


def stop_worker(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        kill_worker(proc)


def parked(inbox: ApprovalInbox, count: int = 1, timeout_s: float = 15.0) -> list[ApprovalItem]:
    """Wait until ``count`` approvals are pending; return them (oldest first)."""
    return list(
        wait_for(
            lambda: items if len(items := inbox.pending()) >= count else None,
            timeout_s,
            f"{count} parked request(s)",
        )
    )


def cli(url: str, ns: str, *args: str, partitions: int = 1) -> subprocess.CompletedProcess[str]:
    """``hookbus ARGS`` as an operator types it."""
    env = dict(
        os.environ,
        HOOKBUS_REDIS_URL=url,
        HOOKBUS_NAMESPACE=ns,
        HOOKBUS_PARTITIONS=str(partitions),
        PYTHONPATH=str(ROOT),
    )
    return subprocess.run(
        [sys.executable, "-m", "hookbus", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def settings_for(url: str, ns: str, partitions: int = 1) -> Settings:
    return Settings(redis_url=url, namespace=ns, partitions=partitions)


def ask_payload(command: str = "rm -rf build") -> dict[str, Any]:
    return {"act": "ask", "tool_name": "Bash", "tool_input": {"command": command}}


def as_json(text: str) -> Any:
    return json.loads(text)


FIXTURES = ROOT / "tests" / "fixtures" / "claude_code"


def claude_event(name: str, command: str) -> dict[str, Any]:
    """A Claude Code hook input of ``tests/fixtures/claude_code`` with its command set."""
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    data["tool_input"] = dict(data["tool_input"], command=command)
    return data


def start_hook(
    url: str, ns: str, data: dict[str, Any], *args: str, cli_name: str = "claude-code"
) -> subprocess.Popen[str]:
    """``hookbus <cli> hook ARGS`` as the agent CLI runs it, the event on its stdin."""
    env = dict(os.environ, HOOKBUS_REDIS_URL=url, HOOKBUS_NAMESPACE=ns, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "hookbus", cli_name, "hook", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(data))
    proc.stdin.close()
    proc.stdin = None  # written and closed: communicate() must not flush it again
    return proc


def finish(proc: subprocess.Popen[str], timeout_s: float = 30) -> tuple[int, Any, str]:
    """(exit code, stdout parsed as JSON or None, stderr) of a finished hook process."""
    out, err = proc.communicate(timeout=timeout_s)
    return proc.returncode, (json.loads(out) if out.strip() else None), err
