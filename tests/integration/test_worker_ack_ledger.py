"""Answers settled in bulk under faults (issue 16's lean path, issue 12's promises): a chain
worker killed after answering but before its ack ledger flushed leaves answered entries
pending; the worker that takes them over must log them from their replies and not run
their hooks a second time."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis

from hookbus import HookBus
from hookbus.bus.decision_batch import logged
from hookbus.bus.keys import CHAIN_GROUP, Keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event
from hookbus.workers.fleet.heartbeat import list_workers
from hookbus.workers.unguarded.marks import guarded_names

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

WORKER_CODE = r"""
import sys, threading
import redis
import hookbus.workers.chain.ledger as ack_ledger
from hookbus.bus.settings.loader import load_settings
from hookbus.hooks.registry import HookRegistry
from hookbus.workers.chain.worker import run_chain_worker
from hookbus.workers.fleet.signals import graceful_signals

url, ns, flush_every_s = sys.argv[1], sys.argv[2], float(sys.argv[3])
ack_ledger.FLUSH_EVERY_S = flush_every_s
settings = load_settings(overrides={"redis_url": url, "namespace": ns}).settings
registry = HookRegistry.from_settings(settings)
counter = redis.Redis.from_url(url)

def guard(event):
    counter.incr(f"test:{ns}:runs")  # a side effect a second run would repeat
    return None

registry.register("guard", guard, events=["PreToolUse"], priority=10)
stop = threading.Event()
with graceful_signals(stop):
    run_chain_worker(settings, registry=registry, stop_event=stop)
"""


def wait_for(condition: Callable[[], Any], timeout_s: float = 20.0, what: str = "") -> Any:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    pytest.fail(f"timed out after {timeout_s} s waiting for {what}")


@contextmanager
def chain_worker(
    url: str, ns: str, client: redis.Redis, *, flush_every_s: float
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER_CODE, url, ns, str(flush_every_s)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    keys = Keys.for_namespace(ns)
    try:
        worker_id = wait_for(
            lambda: next((w.id for w in list_workers(client, keys) if w.pid == proc.pid), None),
            what="the worker's first heartbeat",
        )
        yield proc, worker_id
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def test_answers_a_killed_worker_had_not_settled_are_logged_from_their_replies_not_rerun(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    keys = Keys.for_namespace(namespace)
    runs_key = f"test:{namespace}:runs"
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    try:
        with chain_worker(real_redis_url, namespace, real_redis, flush_every_s=60) as (first, a):
            with HookBus(settings) as bus:
                events = [
                    Event(kind="PreToolUse", payload={"tool_name": "Read", "tool_use_id": f"t{i}"})
                    for i in range(3)
                ]
                answers = [bus.request(event, deadline_ms=30_000) for event in events]
            assert [d.outcome for d in answers] == ["allow"] * 3
            assert not any(d.degraded for d in answers)
            assert int(real_redis.get(runs_key) or 0) == 3
            # answered, but the XACKs and log records still wait in the worker's ledger
            assert real_redis.xpending(keys.requests, CHAIN_GROUP)["pending"] == 3
            assert logged(real_redis, keys.decisions) == []
            assert real_redis.zcard(keys.guarded_calls()) == 0  # the marks wait there too
            first.kill()
            first.wait(10)
        with chain_worker(real_redis_url, namespace, real_redis, flush_every_s=0.1) as (_, b):
            wait_for(
                lambda: real_redis.xpending(keys.requests, CHAIN_GROUP)["pending"] == 0,
                what="the new worker to take the dead one's entries over and settle them",
            )
            records = wait_for(
                lambda: logged(real_redis, keys.decisions), what="the recovered log records"
            )
            assert b != a
        assert sorted(r[b"id"].decode() for r in records) == sorted(e.id for e in events)
        assert {r[b"worker"] for r in records} == {a.encode()}  # the worker that answered
        assert {r[b"recovered"] for r in records} == {b"1"}
        assert int(real_redis.get(runs_key) or 0) == 3  # no hook ran twice
        # the calls those answers guarded are marked all the same (never reported unguarded)
        marks = set(real_redis.zrange(keys.guarded_calls(), 0, -1))
        assert marks == {name for event in events for name in guarded_names(event)}
    finally:
        real_redis.delete(runs_key)
