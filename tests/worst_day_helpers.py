"""Chain workers as real processes, and request loads that count late or degraded answers, for
the worst-day tests (Redis stalls, skewed clocks, cluster failover, head-of-line).

A worker is ``python -c WORKER_CODE`` (optionally behind ``faketime``), serving one guard
hook that sleeps ``payload.sleep_s`` and denies ``payload.act == "deny"``. A load sends
requests at a fixed rate from one asyncio loop and records, per request, when it was sent,
how long it took and whether the answer was degraded, so a test can count degraded answers
inside and outside a fault window.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import redis

from hookbus import AsyncHookBus
from hookbus.bus.keys import Keys
from hookbus.bus.wire import Event
from hookbus.workers.fleet.heartbeat import list_workers

ROOT = Path(__file__).resolve().parents[1]

WORKER_CODE = r"""
import sys, threading, time
from hookbus.bus.wire import HookResult
from hookbus.bus.settings.loader import load_settings
from hookbus.hooks.registry import HookRegistry
from hookbus.workers.chain.worker import run_chain_worker
from hookbus.workers.fleet.signals import graceful_signals

url, ns, partitions, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
settings = load_settings(
    overrides={"redis_url": url, "namespace": ns, "partitions": partitions}
).settings
registry = HookRegistry.from_settings(settings)

def guard(event):
    if event.payload.get("act") == "deny":
        return HookResult(outcome="deny", reason="guard says no")
    if event.payload.get("sleep_s"):  # time.sleep(0) fails under faketime
        time.sleep(float(event.payload["sleep_s"]))
    return None

registry.register("guard", guard, events=["PreToolUse"], priority=10)
stop = threading.Event()
with graceful_signals(stop):
    run_chain_worker(
        settings, registry=registry, stop_event=stop, supervise=False, concurrency=concurrency
    )
"""


def faketime_prefix(offset: str) -> list[str]:
    """``faketime -f <offset>``: run a process with its wall clock shifted (``'-45s'``).

    Its monotonic clock is left alone, as on a real host whose wall clock is wrong
    (libfaketime 0.9.10 also shifts it by default, and Python's timed waits then never
    return); ``time.sleep`` fails with EINVAL under it, so the worker code only waits on
    events.
    """
    found = shutil.which("faketime")
    if found is None:
        raise RuntimeError("faketime is not installed (apt-get install -y faketime)")
    return ["env", "FAKETIME_DONT_FAKE_MONOTONIC=1", found, "-f", offset]


def spawn_chain_worker(
    url: str,
    ns: str,
    *,
    partitions: int = 1,
    concurrency: int = 1,
    prefix: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """A chain worker process in a session of its own (``faketime`` forks the worker as
    its child: signals go to the whole group), stdout/stderr to the test's output."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env = {**base, "PYTHONPATH": str(ROOT), **(env or {})}
    args = [sys.executable, "-c", WORKER_CODE, url, ns, str(partitions), str(concurrency)]
    return subprocess.Popen([*(prefix or []), *args], env=env, cwd=ROOT, start_new_session=True)


def signal_group(proc: subprocess.Popen[bytes], signum: int) -> None:
    """Send ``signum`` to the process group of ``proc`` (gone already: nothing)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signum)


def kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL a worker (and whatever it runs under) and reap it."""
    signal_group(proc, signal.SIGKILL)
    proc.wait(5)


def stop_processes(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM each group, then SIGKILL what has not left within 10 s."""
    for proc in procs:
        if proc.poll() is None:
            signal_group(proc, signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            kill(proc)


@contextmanager
def chain_workers(
    url: str, ns: str, count: int = 1, **kwargs: object
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` chain workers, waited on until each heartbeats; stopped afterwards."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):
            procs.append(spawn_chain_worker(url, ns, **kwargs))  # type: ignore[arg-type]
        wait_for_heartbeats(url, ns, count, partitions=int(kwargs.get("partitions", 1)))  # type: ignore[call-overload]
        yield procs
    finally:
        stop_processes(procs)


def wait_for_heartbeats(url: str, ns: str, count: int, *, partitions: int = 1) -> None:
    """Wait (20 s at most) until ``count`` processes of ``partitions`` workers heartbeat."""
    from hookbus.bus.connection import bus_client
    from hookbus.bus.settings.loader import Settings

    client = bus_client(Settings(redis_url=url, namespace=ns))
    end = time.monotonic() + 20
    while len(list_workers(client, Keys.for_namespace(ns))) < count * partitions:
        if time.monotonic() > end:
            raise AssertionError("the chain workers did not start")
        time.sleep(0.05)
    time.sleep(0.3)  # blocked in their reads


@dataclass
class Answer:
    """One request of a load: when it was sent (monotonic s), its latency, its answer."""

    sent: float
    latency_s: float
    degraded: bool
    outcome: str
    reason: str
    event_id: str


@dataclass
class Load:
    """Requests sent at ``rate`` per second; :meth:`run` fills ``answers``."""

    bus: AsyncHookBus
    rate: float
    deadline_ms: int
    sessions: list[str] = field(default_factory=lambda: [uuid.uuid4().hex])
    answers: list[Answer] = field(default_factory=list)

    async def one(self, index: int) -> None:
        session = self.sessions[index % len(self.sessions)]
        event = Event(kind="PreToolUse", session_id=session, payload={"tool_name": "Bash"})
        sent = time.monotonic()
        decision = await self.bus.request(event, deadline_ms=self.deadline_ms)
        self.answers.append(
            Answer(
                sent,
                time.monotonic() - sent,
                decision.degraded,
                decision.outcome,
                decision.reason or "",
                event.id,
            )
        )

    async def run(self, duration_s: float) -> None:
        """Send for ``duration_s`` at a fixed rate (each request its own task)."""
        tasks: list[asyncio.Task[None]] = []
        start = time.monotonic()
        index = 0
        while time.monotonic() - start < duration_s:
            tasks.append(asyncio.create_task(self.one(index)))
            index += 1
            await asyncio.sleep(max(0.0, start + index / self.rate - time.monotonic()))
        await asyncio.gather(*tasks)

    def degraded_outside(self, windows: list[tuple[float, float]]) -> list[Answer]:
        """Degraded answers to requests whose deadline did not overlap any window."""
        budget = self.deadline_ms / 1000
        return [
            a
            for a in self.answers
            if a.degraded and not any(a.sent + budget > lo and a.sent < hi for lo, hi in windows)
        ]

    def late(self, slack_s: float = 0.1) -> list[Answer]:
        """Answers that came later than the deadline plus ``slack_s``."""
        return [a for a in self.answers if a.latency_s > self.deadline_ms / 1000 + slack_s]


def redis_client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, protocol=2)


#: What a private server needs for :func:`fail_writes`' MISCONF (``CONFIG SET dir``).
REFUSAL_SERVER_ARGS = ("--enable-protected-configs", "yes")


def fill(client: redis.Redis, megabytes: int) -> None:
    """Write about ``megabytes`` MB of filler keys (so a small maxmemory is exceeded)."""
    blob = b"x" * 100_000
    with client.pipeline(transaction=False) as pipe:
        for i in range(megabytes * 10):
            pipe.set(f"filler:{i}", blob)
        pipe.execute()


def fail_writes(client: redis.Redis, kind: str, folder: Path) -> None:
    """Make a private server refuse writes: ``OOM`` (maxmemory below what it holds, under
    noeviction) or ``MISCONF`` (an RDB save that fails, its folder gone, with
    stop-writes-on-bgsave-error on: what a full disk does)."""
    if kind == "OOM":
        fill(client, 2)
        client.config_set("maxmemory-policy", "noeviction")
        client.config_set("maxmemory", "1mb")
        return
    gone = folder / "gone"
    gone.mkdir()
    client.config_set("save", "3600 1")  # writes stop on a failed save only with save points
    client.config_set("stop-writes-on-bgsave-error", "yes")
    client.config_set("dir", str(gone))
    gone.rmdir()
    client.bgsave()
    end = time.monotonic() + 10
    while client.info("persistence").get("rdb_last_bgsave_status") != "err":
        if time.monotonic() > end:
            raise RuntimeError("the failing BGSAVE did not fail")
        time.sleep(0.05)


def heal_writes(client: redis.Redis, kind: str, folder: Path) -> None:
    """Undo :func:`fail_writes`."""
    if kind == "OOM":
        client.config_set("maxmemory", "0")
        return
    client.config_set("dir", str(folder))
    client.config_set("save", "")
    client.bgsave()
    end = time.monotonic() + 10
    while client.info("persistence").get("rdb_last_bgsave_status") != "ok":
        if time.monotonic() > end:
            raise RuntimeError("the BGSAVE after the repair did not succeed")
        time.sleep(0.05)
