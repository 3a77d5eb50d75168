"""Issue 12 row 4: a python hook that kills its process (``os._exit``, a segfault) does not
take the fleet down. The chain worker restarts itself, the crash is logged and counted, the
request is answered by its kind's policy and dead-lettered after at most one hand-over,
and the next request is served as usual."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redis

from hookbus.bus import reqrep
from hookbus.bus.keys import CHAIN_GROUP, Keys
from hookbus.bus.wire import Decision, Event, decode, encode, now_ms
from hookbus.workers.fleet.heartbeat import list_workers

ROOT = Path(__file__).resolve().parents[2]

WORKER = r"""
import ctypes, os, sys, threading
from hookbus.bus.settings.loader import Settings
from hookbus.hooks.registry import HookRegistry
from hookbus.workers.chain.worker import run_chain_worker
from hookbus.workers.fleet.signals import graceful_signals

url, ns = sys.argv[1], sys.argv[2]
settings = Settings(redis_url=url, namespace=ns)
registry = HookRegistry.from_settings(settings)

def crasher(event):
    act = event.payload.get("act")
    if act == "exit":
        os._exit(3)
    if act == "exit0":  # a "clean" exit code is no clean stop
        os._exit(0)
    if act == "segfault":
        ctypes.string_at(0)

registry.register("crasher", crasher, events=["PreToolUse"])
stop = threading.Event()
with graceful_signals(stop):
    run_chain_worker(settings, registry=registry, stop_event=stop)
"""


def ask(client: redis.Redis, keys: Keys, act: str | None, timeout_s: float) -> Decision | None:
    event = Event(
        kind="PreToolUse", payload={"act": act} if act else {}, deadline=now_ms() + 10_000
    )
    event.reply_to = keys.reply(event.id)
    client.xadd(keys.requests, {reqrep.REQUEST_FIELD: encode(event)})
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:  # short BLPOPs: redis-py's socket timeout is 5 s
        popped: Any = client.blpop([event.reply_to], timeout=2)
        if popped is not None:
            return decode(popped[1], Decision)
    return None


def test_a_hook_that_kills_its_process_leaves_a_serving_worker_and_a_policy_answer(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    keys = Keys.for_namespace(namespace)
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER, real_redis_url, namespace],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        end = time.monotonic() + 20
        while not [w for w in list_workers(real_redis, keys) if w.pid == proc.pid]:
            assert proc.poll() is None, "the worker did not start"
            assert time.monotonic() < end, "the worker did not start"
            time.sleep(0.05)
        for act in ("exit", "segfault", "exit0"):
            decision = ask(real_redis, keys, act, timeout_s=9)
            assert proc.poll() is None, f"a hook calling {act} took the worker down"
            assert decision is not None, f"the request whose hook crashed ({act}) got no answer"
            assert (decision.outcome, decision.degraded) == ("deny", True)
            assert decision.reason is not None and "died running it" in decision.reason
            served = ask(real_redis, keys, None, timeout_s=5)
            assert served is not None and served.degraded is False
        dead = real_redis.xrange(keys.dead_letters)
        assert [f[b"reason"] for _, f in dead] == [b"too many deliveries"] * 3
        assert real_redis.xpending(keys.requests, CHAIN_GROUP)["pending"] == 0
        (beat,) = [w for w in list_workers(real_redis, keys) if w.pid == proc.pid]
        assert beat.extra.get("crashes") == 6  # each poison request: one run, one hand-over
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        if proc.stderr is not None:
            proc.stderr.close()
