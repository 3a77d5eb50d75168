"""One slow chain never delays another request. A worker that read a batch
holding a slow request still starts the rest at once (or does not take them at all), so
the fast requests read with it are answered within their deadline."""

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

import pytest
import redis

from hookbus import AsyncHookBus
from hookbus.bus import reqrep
from hookbus.bus.keys import CHAIN_GROUP, Keys
from hookbus.bus.wire import Decision, Event, decode, encode, now_ms
from hookbus.workers.fleet.heartbeat import list_workers
from tests import worst_day_helpers as worst_day

ROOT = Path(__file__).resolve().parents[2]

WORKER = r"""
import sys, threading, time
from hookbus.bus.settings.loader import Settings
from hookbus.hooks.registry import HookRegistry
from hookbus.workers.chain.worker import run_chain_worker
from hookbus.workers.fleet.signals import graceful_signals

url, ns, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3])
settings = Settings(redis_url=url, namespace=ns)
registry = HookRegistry.from_settings(settings)

def maybe_slow(event):
    time.sleep(float(event.payload.get("sleep_s", 0)))

registry.register("maybe_slow", maybe_slow, events=["PreToolUse"])
stop = threading.Event()
with graceful_signals(stop):
    run_chain_worker(settings, registry=registry, stop_event=stop, concurrency=concurrency)
"""


class Workers:
    """Chain worker processes, started one at a time."""

    def __init__(self, url: str, ns: str) -> None:
        self.url, self.ns = url, ns
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, concurrency: int) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.procs.append(
            subprocess.Popen(
                [sys.executable, "-c", WORKER, self.url, self.ns, str(concurrency)],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        client = redis.Redis.from_url(self.url)
        end = time.monotonic() + 20
        while len(list_workers(client, Keys.for_namespace(self.ns))) < len(self.procs):
            assert time.monotonic() < end, "the worker did not start"
            time.sleep(0.05)
        client.close()
        time.sleep(0.3)  # blocked in its read


@contextmanager
def chain_workers(url: str, ns: str, concurrencies: list[int]) -> Iterator[Workers]:
    workers = Workers(url, ns)
    procs = workers.procs
    try:
        for concurrency in concurrencies:
            workers.start(concurrency)
        yield workers
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def request(keys: Keys, deadline_ms: int, **payload: Any) -> Event:
    event = Event(kind="PreToolUse", payload=payload, deadline=now_ms() + deadline_ms)
    event.reply_to = keys.reply(event.id)
    return event


def test_a_slow_request_read_with_60_fast_ones_does_not_expire_them(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    keys = Keys.for_namespace(namespace)
    with chain_workers(real_redis_url, namespace, [1, 1]):
        slow = request(keys, 5_000, sleep_s=1.5)
        fast = [request(keys, 700) for _ in range(60)]
        with real_redis.pipeline(transaction=True) as pipe:  # MULTI: one read takes them all
            for event in (slow, *fast):
                pipe.xadd(keys.requests, {reqrep.REQUEST_FIELD: encode(event)})
            pipe.execute()
        started = time.monotonic()
        answered = 0
        for event in fast:
            left = max(0.01, 0.7 - (time.monotonic() - started))
            popped: Any = real_redis.blpop([event.reply_to], timeout=left)  # type: ignore[list-item]
            if popped is not None and not decode(popped[1], Decision).degraded:
                answered += 1
        assert answered == 60, f"{60 - answered} of 60 fast requests expired behind a slow one"
        popped = real_redis.blpop([slow.reply_to], timeout=3)  # type: ignore[list-item]
        assert popped is not None
        time.sleep(0.1)
        assert real_redis.xpending(keys.requests, CHAIN_GROUP)["pending"] == 0


def test_a_pool_worker_takes_only_what_it_has_threads_for(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    keys = Keys.for_namespace(namespace)
    with chain_workers(real_redis_url, namespace, [2]) as workers:
        first = request(keys, 5_000, sleep_s=1.5)  # keeps one of its two threads busy
        real_redis.xadd(keys.requests, {reqrep.REQUEST_FIELD: encode(first)})
        end = time.monotonic() + 5
        while real_redis.xpending(keys.requests, CHAIN_GROUP)["pending"] == 0:
            assert time.monotonic() < end
            time.sleep(0.01)
        workers.start(1)  # an idle neighbour
        second = request(keys, 5_000, sleep_s=1.5)
        fast = request(keys, 700)
        with real_redis.pipeline(transaction=True) as pipe:
            for event in (second, fast):
                pipe.xadd(keys.requests, {reqrep.REQUEST_FIELD: encode(event)})
            pipe.execute()
        popped: Any = real_redis.blpop([fast.reply_to], timeout=0.7)  # type: ignore[list-item]
        assert popped is not None, "a fast request waited for a thread behind two slow ones"
        assert decode(popped[1], Decision).degraded is False


# All 61 share one 300 ms window from the moment they are sent, so a parallel run that
# takes the CPU from the client for that long expires every one: it runs with the timing
# tests, alone.
@pytest.mark.timing
@pytest.mark.parametrize(
    ("concurrency", "slow_at"),
    [(1, 0), (1, 30), (1, 60), (4, 30)],
    ids=["inline-slow-first", "inline-slow-middle", "inline-slow-last", "thread-pool"],
)
def test_61_requests_at_once_to_2_workers_one_slow_expire_no_fast_one(
    real_redis_url: str, namespace: str, concurrency: int, slow_at: int
) -> None:
    """The case as an agent fleet sends it: 61 asyncio requests at once, one of them (the
    ``slow_at``-th sent) to a hook path needing 2 s; none of the 60 fast ones (300 ms
    deadlines) may expire, wherever the slow one sits in a batch a worker read."""
    with worst_day.chain_workers(real_redis_url, namespace, 2, concurrency=concurrency):

        async def main() -> list[Decision]:
            bus = AsyncHookBus.from_url(real_redis_url, namespace)
            try:
                await bus.request(Event(kind="PreToolUse"), deadline_ms=2_000)  # connected
                calls = [
                    bus.request(Event(kind="PreToolUse", payload={"act": "deny"}), deadline_ms=300)
                    for _ in range(60)
                ]
                slow = Event(kind="PreToolUse", payload={"sleep_s": 2.0})
                calls.insert(slow_at, bus.request(slow, deadline_ms=5_000))
                return list(await asyncio.gather(*calls))
            finally:
                await bus.close()

        answers = asyncio.run(main())
    slow = answers.pop(slow_at)
    expired = [d.reason for d in answers if d.degraded]
    assert not expired, f"{len(expired)} of 60 fast requests expired: {expired[:3]}"
    assert {d.reason for d in answers} == {"guard says no"}
    assert not slow.degraded
