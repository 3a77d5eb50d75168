"""Issue 12 row 8: a poison entry (a payload nested 10,000 deep, an oversize entry, a payload
past the depth bound) is handled on its own: its neighbours in the same read are answered
(chain) or dispatched (fan-out) as if it were not there."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from hookbus.bus import reqrep
from hookbus.bus.eventlog import EVENT_FIELD
from hookbus.bus.keys import CHAIN_GROUP, FANOUT_GROUP, Keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Decision, Event, decode, encode, now_ms
from hookbus.hooks.registry import HookRegistry
from hookbus.workers.chain.worker import run_chain_worker
from hookbus.workers.fanout.dispatcher import Dispatcher
from tests.fanout_helpers import Hook, StubRegistry
from tests.poison_helpers import deep_event_bytes


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.fixture
def chain_worker(real_redis_url: str, namespace: str) -> Iterator[Settings]:
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    registry = HookRegistry.from_settings(settings)
    registry.register("guard", lambda event: None, events=["PreToolUse"])
    stop = threading.Event()
    thread = threading.Thread(
        target=run_chain_worker,
        args=(settings,),
        kwargs={"registry": registry, "stop_event": stop},
        daemon=True,
    )
    thread.start()
    try:
        yield settings
    finally:
        stop.set()
        thread.join(10)


def _request(keys: Keys, **fields: Any) -> Event:
    event = Event(kind="PreToolUse", deadline=now_ms() + 5_000, **fields)
    event.reply_to = keys.reply(event.id)
    return event


def test_a_poison_request_does_not_take_its_neighbours_down(
    chain_worker: Settings, real_redis: redis.Redis
) -> None:
    keys = Keys.for_namespace(chain_worker.namespace)
    with contextlib.suppress(redis.exceptions.ResponseError):  # BUSYGROUP: the worker's
        real_redis.xgroup_create(keys.requests, CHAIN_GROUP, id="0", mkstream=True)
    before = _request(keys)
    after = _request(keys)
    too_deep = _request(keys, payload=nested(200))
    deep_reply = keys.reply("deep")
    with real_redis.pipeline(transaction=False) as pipe:  # one read takes them all
        pipe.xadd(keys.requests, {reqrep.REQUEST_FIELD: encode(before)})
        pipe.xadd(
            keys.requests,
            {reqrep.REQUEST_FIELD: deep_event_bytes(10_000, id="deep", reply_to=deep_reply)},
        )
        pipe.xadd(keys.requests, {reqrep.REQUEST_FIELD: b"x" * (2 << 20)})  # oversize
        pipe.xadd(keys.requests, {reqrep.REQUEST_FIELD: encode(too_deep)})
        pipe.xadd(keys.requests, {reqrep.REQUEST_FIELD: encode(after)})
        pipe.execute()
    for sent in (before, after):
        popped: Any = real_redis.blpop([keys.reply(sent.id)], timeout=3)
        assert popped is not None, "a neighbour of the poison entry was not answered"
        decision = decode(popped[1], Decision)
        assert (decision.outcome, decision.degraded) == ("allow", False)
    # a payload past the depth bound decodes: it gets its own degraded policy answer
    popped = real_redis.blpop([keys.reply(too_deep.id)], timeout=3)
    assert popped is not None
    denied = decode(popped[1], Decision)
    assert (denied.outcome, denied.degraded) == ("deny", True)
    assert denied.reason is not None and "nested deeper" in denied.reason
    # the two that cannot be decoded are dead-lettered, each on its own
    end = time.monotonic() + 3
    while time.monotonic() < end and real_redis.xlen(keys.dead_letters) < 2:
        time.sleep(0.02)
    reasons = sorted(f[b"reason"].decode() for _, f in real_redis.xrange(keys.dead_letters))
    assert len(reasons) == 2
    assert any("nested" in r or "recursion" in r.lower() for r in reasons), reasons
    assert any("bytes" in r for r in reasons), reasons
    assert real_redis.xpending(keys.requests, CHAIN_GROUP)["pending"] == 0


def test_a_poison_event_is_dead_lettered_alone_and_its_neighbours_get_their_jobs(
    real_redis: redis.Redis, namespace: str, real_redis_url: str
) -> None:
    from rq import Queue

    from hookbus.workers.fanout.serializer import MsgpackSerializer
    from tests.fanout_helpers import queued_events

    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    keys = Keys.for_namespace(namespace)
    registry = StubRegistry([Hook("telemetry", ("PreToolUse",), blocking=False)])
    dispatcher = Dispatcher(settings, registry, bus=real_redis, rq=real_redis)
    dispatcher.ensure_group()
    good = [Event(kind="PreToolUse"), Event(kind="PreToolUse")]
    with real_redis.pipeline(transaction=False) as pipe:
        pipe.xadd(keys.events, {EVENT_FIELD: encode(good[0])})
        pipe.xadd(keys.events, {EVENT_FIELD: deep_event_bytes(10_000, id="deep")})
        pipe.xadd(keys.events, {EVENT_FIELD: encode(good[1])})
        pipe.execute()
    dispatcher.step()
    queue = Queue(keys.rq_queue, connection=real_redis, serializer=MsgpackSerializer)
    assert queued_events(real_redis, namespace) == 2  # the two good ones (in one pack)
    assert queue.count >= 1
    ((_, dead),) = real_redis.xrange(keys.dead_letters)
    assert len(dead[b"e"]) > 10_000  # the poison itself, kept for inspection
    assert real_redis.xpending(keys.events, FANOUT_GROUP)["pending"] == 0
