"""Helpers shared by ``test_blocking_bus.py`` and the test modules that
need the same set-up (a test module never imports another)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from hookbus.bus.keys import Keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event
from hookbus.workers.fleet.heartbeat import list_workers

ROOT = Path(__file__).resolve().parents[1]


WORKER_CODE = r"""
import os, sys, threading, time
from hookbus.bus.wire import HookResult, HookSignal
from hookbus.bus.settings.loader import load_settings
from hookbus.hooks.registry import HookRegistry
from hookbus.workers.chain.worker import run_chain_worker
from hookbus.workers.fleet.signals import graceful_signals

url, ns, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3])
settings = load_settings(overrides={"redis_url": url, "namespace": ns}).settings
registry = HookRegistry.from_settings(settings)

def stuck(event):
    if event.payload.get("act") == "hang_hook":
        time.sleep(30)

def guard(event):
    act = event.payload.get("act")
    if act == "deny":
        return HookResult(outcome="deny", reason="guard says no")
    if act == "ask":
        return HookResult(outcome="ask", reason="check with a person")
    if act == "halt":
        return HookResult(outcome="halt", reason="stop the session")
    if act == "rewrite":
        return HookResult(updated={"tool_input": {"command": "ls -la"}})
    if act == "sleep":
        time.sleep(float(event.payload["sleep_s"]))
    if act == "hang_here" and os.environ.get("HOOKBUS_TEST_HANG") == "1":
        time.sleep(60)
    return None

def annotate(event):
    command = event.payload.get("tool_input", {}).get("command")
    return HookResult(
        context=[f"saw {command}"],
        signals=[HookSignal(kind="ability_guard", code="checked", severity="low")],
    )

registry.register("stuck", stuck, events=["PreToolUse"], priority=5, on_error="deny",
                  isolate=True, timeout_s=10)
registry.register("guard", guard, events=["PreToolUse", "PermissionRequest"], priority=10)
registry.register("annotate", annotate, events=["PreToolUse"], priority=20)
stop = threading.Event()
with graceful_signals(stop):
    run_chain_worker(settings, concurrency=concurrency, registry=registry, stop_event=stop)
"""


def wait_for(condition: Callable[[], Any], timeout_s: float = 15.0, what: str = "") -> Any:
    """Poll ``condition`` until truthy; fail the test after ``timeout_s``."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.01)
    pytest.fail(f"timed out after {timeout_s} s waiting for {what or condition}")


class WorkerProc:
    """A chain worker subprocess and what the test needs to know about it."""

    def __init__(self, url: str, ns: str, *, concurrency: int = 1, hang: bool = False) -> None:
        env = dict(os.environ)
        env["HOOKBUS_TEST_HANG"] = "1" if hang else "0"
        env["PYTHONPATH"] = str(ROOT)
        self.keys = Keys.for_namespace(ns)
        self.url = url
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER_CODE, url, ns, str(concurrency)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self.worker_id = ""

    def wait_ready(self, client: redis.Redis, known: set[str] | None = None) -> str:
        def mine() -> str | None:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                pytest.fail(f"worker exited with {self.proc.returncode}: {err}")
            for w in list_workers(client, self.keys):
                if w.pid == self.proc.pid and w.role == "chain":
                    return w.id
            return None

        self.worker_id = wait_for(mine, what="the worker's first heartbeat")
        return self.worker_id

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        if self.proc.stderr:
            self.proc.stderr.close()


def settings_for(url: str, ns: str) -> Settings:
    return Settings(redis_url=url, namespace=ns)


def bash(command: str, act: str | None = None, **extra: Any) -> Event:
    payload: dict[str, Any] = {"tool_name": "Bash", "tool_input": {"command": command}}
    if act:
        payload["act"] = act
    payload.update(extra)
    return Event(kind="PreToolUse", session_id="s1", agent_id="a1", payload=payload)
