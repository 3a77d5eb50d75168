"""Issue 12 row 3: a request's deadline is its ``budget_ms`` anchored to Redis time (the
stream entry id's milliseconds), so a producer whose clock is 30 s off is served exactly
like one whose clock is right."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from hookbus.bus import reqrep
from hookbus.bus.keys import CHAIN_GROUP, Keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Decision, Event, decode, encode, now_ms
from hookbus.hooks.registry import HookRegistry
from hookbus.workers.chain.worker import run_chain_worker

SKEW_MS = 30_000


class Fleet:
    """One chain worker on a thread, with a hook that records the requests it saw."""

    def __init__(self, url: str, ns: str) -> None:
        self.settings = Settings(redis_url=url, namespace=ns)
        self.keys = Keys.for_namespace(ns)
        self.seen: list[str] = []
        self.registry = HookRegistry.from_settings(self.settings)
        self.registry.register(
            "recorder", lambda event: self.seen.append(event.id), events=["PreToolUse"]
        )
        self.stop = threading.Event()
        self.thread = threading.Thread(
            target=run_chain_worker,
            args=(self.settings,),
            kwargs={"registry": self.registry, "stop_event": self.stop},
            daemon=True,
        )

    def start(self) -> None:
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(10)


@pytest.fixture
def fleet(real_redis_url: str, namespace: str) -> Iterator[Fleet]:
    fleet = Fleet(real_redis_url, namespace)
    try:
        yield fleet
    finally:
        fleet.close()


def skewed_request(keys: Keys, *, skew_ms: int, budget_ms: int) -> Event:
    """A request as a producer whose clock is ``skew_ms`` off sends it."""
    request_id = uuid.uuid4().hex
    fields: dict[str, Any] = {
        "kind": "PreToolUse",
        "ts": now_ms() + skew_ms,
        "deadline": now_ms() + skew_ms + budget_ms,
        "reply_to": keys.reply(request_id),
        "request_id": request_id,
        "budget_ms": budget_ms,
    }
    return Event(**fields)


def send(client: redis.Redis, keys: Keys, event: Event) -> None:
    with contextlib.suppress(redis.exceptions.ResponseError):  # BUSYGROUP
        client.xgroup_create(keys.requests, CHAIN_GROUP, id="0", mkstream=True)
    client.xadd(keys.requests, {reqrep.REQUEST_FIELD: encode(event)})


def test_a_producer_whose_clock_is_behind_is_answered_not_expired(
    fleet: Fleet, real_redis: redis.Redis
) -> None:
    fleet.start()
    event = skewed_request(fleet.keys, skew_ms=-SKEW_MS, budget_ms=2_000)
    send(real_redis, fleet.keys, event)
    popped: Any = real_redis.blpop([event.reply_to], timeout=3)  # type: ignore[list-item]
    assert popped is not None, "a request from a producer 30 s behind was dropped as expired"
    decision = decode(popped[1], Decision)
    assert (decision.outcome, decision.degraded) == ("allow", False)
    assert decision.request_id == getattr(event, "request_id")  # noqa: B009
    assert fleet.seen == [event.id]


def test_a_producer_whose_clock_is_ahead_cannot_keep_a_spent_request_alive(
    fleet: Fleet, real_redis: redis.Redis
) -> None:
    # sent with 100 ms to live while no worker reads; by Redis time it is spent when the
    # worker starts 400 ms later, whatever the producer's clock wrote as its deadline
    event = skewed_request(fleet.keys, skew_ms=SKEW_MS, budget_ms=100)
    send(real_redis, fleet.keys, event)
    time.sleep(0.4)
    fresh = skewed_request(fleet.keys, skew_ms=SKEW_MS, budget_ms=5_000)
    send(real_redis, fleet.keys, fresh)
    fleet.start()
    popped: Any = real_redis.blpop([fresh.reply_to], timeout=3)  # type: ignore[list-item]
    assert popped is not None
    assert fleet.seen == [fresh.id], "a spent request ran because its producer's clock is ahead"
    assert real_redis.exists(event.reply_to) == 0  # type: ignore[arg-type]
    end = time.monotonic() + 3  # the spent one is acknowledged in bulk (the ack ledger)
    while real_redis.xpending(fleet.keys.requests, CHAIN_GROUP)["pending"]:
        assert time.monotonic() < end, "the spent request was never acknowledged"
        time.sleep(0.02)


def test_a_request_without_a_budget_is_judged_by_its_deadline_as_before(
    fleet: Fleet, real_redis: redis.Redis
) -> None:
    spent = Event(kind="PreToolUse", deadline=now_ms() - 10)
    spent.reply_to = fleet.keys.reply(spent.id)
    live = Event(kind="PreToolUse", deadline=now_ms() + 5_000)
    live.reply_to = fleet.keys.reply(live.id)
    send(real_redis, fleet.keys, spent)
    send(real_redis, fleet.keys, live)
    fleet.start()
    popped: Any = real_redis.blpop([live.reply_to], timeout=3)
    assert popped is not None
    assert decode(popped[1], Decision).request_id == live.id
    assert fleet.seen == [live.id]


SKEWED_PRODUCER = r"""
import json, sys, time
skew_ns = int(sys.argv[3]) * 1_000_000
real_time_ns, real_time = time.time_ns, time.time
time.time_ns = lambda: real_time_ns() + skew_ns  # this host's wall clock is off
time.time = lambda: real_time() + skew_ns / 1e9
from hookbus import HookBus
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event, to_builtins
with HookBus(Settings(redis_url=sys.argv[1], namespace=sys.argv[2])) as bus:
    decision = bus.request(Event(kind="PreToolUse"), deadline_ms=2_000)
print(json.dumps(to_builtins(decision)))
"""


@pytest.mark.parametrize("skew_ms", [-SKEW_MS, SKEW_MS])
def test_a_producer_process_with_a_skewed_clock_gets_the_chain_s_answer(
    fleet: Fleet, real_redis_url: str, namespace: str, skew_ms: int
) -> None:
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    fleet.start()
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", SKEWED_PRODUCER, real_redis_url, namespace, str(skew_ms)],
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    decision = json.loads(out.stdout.strip().splitlines()[-1])
    assert decision.get("degraded", False) is False, decision
    assert decision.get("outcome", "allow") == "allow"
    assert len(fleet.seen) == 1
