"""No silent trimming: a stream never drops entries its consumer group has not read.

Producers no longer trim the request and event streams; consumers trim what every group
was delivered and acknowledged; a stream that holds its limit refuses more, saying so; and
entries trimmed before delivery anyway (a producer's XADD MAXLEN) are counted, shown by
``status``, exported as a metric, and the group's lag is set right again.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

import pytest
import redis

from hookbus import AsyncHookBus, HookBus
from hookbus.bus import keys as keymod
from hookbus.bus.keys import CHAIN_GROUP, FANOUT_GROUP, Keys
from hookbus.bus.settings.loader import load_settings
from hookbus.bus.wire import Event
from hookbus.errors import StreamBacklogFull
from hookbus.workers.fleet.status import gather
from hookbus.workers.fleet.trimmer import StreamTrimmer, TrimmedStream
from tests.worst_day_helpers import Load, chain_workers

#: The backlog limit of the event tests, and how many events they try to publish.
EVENTS_MAXLEN, EVENTS = 2_000, 20_000


def settings_for(url: str, ns: str, **streams: int):  # type: ignore[no-untyped-def]
    return load_settings(overrides={"redis_url": url, "namespace": ns, "streams": streams}).settings


def group_of(client: redis.Redis, key: str, group: str) -> dict[str, object]:
    for raw in client.xinfo_groups(key):
        data = {(k.decode() if isinstance(k, bytes) else k): v for k, v in raw.items()}
        if data["name"] in (group, group.encode()):
            return data
    raise AssertionError(f"no group {group} on {key}")


def test_20000_events_with_maxlen_2000_and_no_dispatcher_lose_none(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    settings = settings_for(real_redis_url, namespace, events_maxlen=EVENTS_MAXLEN)
    key = Keys.for_namespace(namespace).events
    real_redis.xgroup_create(key, FANOUT_GROUP, id="0", mkstream=True)  # a dispatcher ran once
    bus = HookBus(settings)
    accepted: list[str] = []
    refusals: set[str] = set()
    try:
        for i in range(EVENTS):
            try:
                accepted.append(bus.publish(Event(kind="PostToolUse", payload={"i": i})))
            except StreamBacklogFull as exc:
                refusals.add(str(exc).split(" holds ")[0])
                assert "streams.events_maxlen = 2000" in str(exc)
    finally:
        bus.close()
    assert refusals, "20,000 events into a stream limited to 2,000 were all accepted"
    assert real_redis.xlen(key) == len(accepted), "accepted events were trimmed"
    # past the limit, one add every 0.1 s goes through with the XLEN that looks again
    assert EVENTS_MAXLEN <= len(accepted) <= EVENTS_MAXLEN + 50


def test_a_dispatcher_that_takes_the_backlog_lets_publishes_in_again(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    settings = settings_for(real_redis_url, namespace, events_maxlen=500)
    key = Keys.for_namespace(namespace).events
    real_redis.xgroup_create(key, FANOUT_GROUP, id="0", mkstream=True)

    async def fill() -> int:
        bus = AsyncHookBus(settings)
        sent = 0
        try:
            for _ in range(20):
                batch = [Event(kind="PostToolUse") for _ in range(100)]
                try:
                    await bus.publish_many(batch)
                    sent += len(batch)
                except StreamBacklogFull:
                    pass
        finally:
            await bus.close()
        return sent

    sent = asyncio.run(fill())
    assert 500 <= sent <= 600 and real_redis.xlen(key) == sent
    # a dispatcher takes and acknowledges everything; its trimmer drops what it took
    read = real_redis.xreadgroup(FANOUT_GROUP, "d1", {key: ">"}, count=10_000)
    ids = [entry_id for entry_id, _ in read[0][1]]
    assert len(ids) == sent
    real_redis.xack(key, FANOUT_GROUP, *ids)
    stream = TrimmedStream(real_redis, key, "streams.events_maxlen", 500)
    StreamTrimmer([stream], threading.Event()).trim(stream)
    kept = real_redis.xlen(key)  # the history (half the limit), rounded up to whole nodes
    assert kept < sent and kept <= 500 - 100, kept  # room for at least one batch again
    assert stream.lost == 0
    time.sleep(0.15)  # the producer's next look at the stream's length
    # batches go in again until the producer sees the stream at its limit once more (how
    # many depends on how many whole nodes the trimmer kept)
    assert asyncio.run(fill()) >= 100


def test_the_trimmer_keeps_what_a_group_has_not_acknowledged(
    real_redis: redis.Redis, namespace: str
) -> None:
    key = Keys.for_namespace(namespace).requests
    real_redis.xgroup_create(key, CHAIN_GROUP, id="0", mkstream=True)
    for i in range(1_000):
        real_redis.xadd(key, {"i": i})
    read = real_redis.xreadgroup(CHAIN_GROUP, "w1", {key: ">"}, count=600)
    ids = [entry_id for entry_id, _ in read[0][1]]
    real_redis.xack(key, CHAIN_GROUP, *ids[:300], *ids[301:])  # the 301st stays pending
    stream = TrimmedStream(real_redis, key, "streams.requests_maxlen", 200)  # history 100
    StreamTrimmer([stream], threading.Event()).trim(stream)
    first = real_redis.xrange(key, count=1)[0][0]
    assert first <= ids[300]  # the pending entry and everything after it are kept
    assert ids[200] < first or real_redis.xlen(key) < 1_000  # what was acked went
    assert real_redis.xlen(key) >= 700
    assert group_of(real_redis, key, CHAIN_GROUP)["lag"] == 400


def test_entries_trimmed_before_delivery_are_counted_shown_and_the_lag_set_right(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    settings = settings_for(real_redis_url, namespace)
    key = Keys.for_namespace(namespace).events
    real_redis.xgroup_create(key, FANOUT_GROUP, id="0", mkstream=True)
    for i in range(100):
        real_redis.xadd(key, {"i": i})
    real_redis.xreadgroup(FANOUT_GROUP, "d1", {key: ">"}, count=100)  # taken and acked
    real_redis.xack(key, FANOUT_GROUP, *[e for e, _ in real_redis.xrange(key)])
    for i in range(1_500):  # an older producer, trimming as it adds
        real_redis.xadd(key, {"i": i}, maxlen=500, approximate=False)
    assert group_of(real_redis, key, FANOUT_GROUP)["lag"] == 1_500  # what Redis claims
    stream = TrimmedStream(real_redis, key, "streams.events_maxlen", 1_000_000)
    StreamTrimmer([stream], threading.Event()).trim(stream)
    assert stream.lost == 1_000
    assert int(real_redis.get(keymod.trimmed_undelivered(key)) or 0) == 1_000
    assert group_of(real_redis, key, FANOUT_GROUP)["lag"] == 500  # true again
    events = next(s for s in gather(real_redis, settings, prune=False).streams if s.key == key)
    assert events.lost == 1_000
    StreamTrimmer([stream], threading.Event()).trim(stream)
    assert int(real_redis.get(keymod.trimmed_undelivered(key)) or 0) == 1_000  # once


@pytest.mark.parametrize("stall_s", [3.0])
def test_requests_while_the_worker_stalls_are_refused_at_the_limit_not_trimmed(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, stall_s: float
) -> None:
    # 3 s at 100 requests/s pass the limit on top of the history kept (half of it)
    settings = settings_for(real_redis_url, namespace, requests_maxlen=400)
    key = Keys.for_namespace(namespace).requests
    env = {"HOOKBUS_STREAMS__REQUESTS_MAXLEN": "400"}  # the workers' trimming: one setting
    with chain_workers(real_redis_url, namespace, env=env) as procs:

        async def main() -> tuple[Load, float]:
            bus = AsyncHookBus(settings)
            load = Load(bus, 100, 300)
            try:
                sending = asyncio.create_task(load.run(8.0))
                await asyncio.sleep(2.0)  # a history of delivered requests builds up
                os.killpg(procs[0].pid, signal.SIGSTOP)
                await asyncio.sleep(stall_s)
                os.killpg(procs[0].pid, signal.SIGCONT)
                resumed = time.monotonic()
                await sending
            finally:
                os.killpg(procs[0].pid, signal.SIGCONT)
                await bus.close()
            return load, resumed

        load, resumed = asyncio.run(main())
        time.sleep(1.5)  # the worker drains what waited and its trimmer runs
        group = group_of(real_redis, key, CHAIN_GROUP)
    reasons = [a.reason for a in load.answers if a.degraded]
    assert any("request backlog is full" in r for r in reasons), set(reasons)
    assert group["pending"] == 0 and group["lag"] == 0, group
    assert int(real_redis.get(keymod.trimmed_undelivered(key)) or 0) == 0
    late = [a for a in load.answers if a.sent > resumed + 1.0 and a.degraded]
    assert not late, f"{len(late)} degraded answers a second after the stall"
