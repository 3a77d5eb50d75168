"""Helpers of the fleet-state tests: hook folders with rules, a fleet of worker processes
started with ``hookbus worker``, and many requests sent at once."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hookbus.bus.connection import bus_client
from hookbus.bus.keys import Keys
from hookbus.bus.settings import load_settings
from hookbus.bus.wire import Decision, Event
from hookbus.workers.fleet.heartbeat import alive_workers

ROOT = Path(__file__).resolve().parents[1]


def write_hook(root: Path, name: str, text: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "HOOK.toml").write_text(f'name = "{name}"\n{text.strip()}\n')
    return folder


def fleet_env(url: str, namespace: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env.update(
        {
            "HOOKBUS_REDIS_URL": url,
            "HOOKBUS_NAMESPACE": namespace,
            "HOOKBUS_RQ__RESULT_TTL_S": "60",
            "PYTHONPATH": str(ROOT),
        }
    )
    env.update(extra)
    return env


class Fleet:
    """Worker processes of one namespace, all stopped when the test ends."""

    def __init__(self, url: str, namespace: str, hooks_dir: Path, **env: str) -> None:
        self.url = url
        self.namespace = namespace
        self.hooks_dir = hooks_dir
        self.env = fleet_env(url, namespace, **env)
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, role: str, *extra: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "hookbus",
                "--log-level",
                "WARNING",
                "worker",
                "--role",
                role,
                "--hooks-dir",
                str(self.hooks_dir),
                *extra,
            ],
            env=self.env,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.procs.append(proc)
        return proc

    def settings(self) -> Any:
        return load_settings(
            overrides={"redis_url": self.url, "namespace": self.namespace}
        ).settings

    def wait_chain_workers(self, n: int, timeout_s: float = 30.0) -> None:
        """Until ``n`` chain workers started here, and still running, beat: the heartbeat
        of one a test killed stays "alive" for a while and must not count."""
        settings = self.settings()
        client = bus_client(settings)
        keys = Keys.for_namespace(self.namespace)
        end = time.monotonic() + timeout_s
        while True:
            running = {proc.pid for proc in self.procs if proc.poll() is None}
            beating = alive_workers(client, keys, dead_after_ms=5_000, role="chain")
            if len([w for w in beating if w.pid in running]) >= n:
                return
            assert time.monotonic() < end, f"{n} chain workers did not start"
            assert len(running) >= n, f"fewer than {n} workers still run"
            time.sleep(0.05)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextmanager
def fleet(url: str, namespace: str, hooks_dir: Path, **env: str) -> Iterator[Fleet]:
    started = Fleet(url, namespace, hooks_dir, **env)
    try:
        yield started
    finally:
        started.stop()


def tool_call(session: str, agent: str = "agent-1", **tool_input: Any) -> Event:
    return Event(
        kind="PreToolUse",
        session_id=session,
        agent_id=agent,
        payload={"tool_name": "Bash", "tool_input": {"command": "true", **tool_input}},
    )


def request_all(url: str, namespace: str, events: list[Event], deadline_ms: int) -> list[Decision]:
    """Send every event at once (asyncio) and return the decisions, in order."""
    from hookbus import AsyncHookBus

    async def go() -> list[Decision]:
        async with AsyncHookBus.from_url(url, namespace=namespace) as bus:
            return list(
                await asyncio.gather(*(bus.request(e, deadline_ms=deadline_ms) for e in events))
            )

    return asyncio.run(go())
