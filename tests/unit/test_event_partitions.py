"""Partitioned event streams (issue 16 point 2): key names, where each producer appends, and
the dispatcher's keys per partition; fake Redis, no server."""

from __future__ import annotations

import fakeredis
import pytest
from redis.crc import key_slot

from hookbus.bus import eventlog, keys
from hookbus.bus.keys import Keys, partition_of
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event, decode
from hookbus.errors import ConfigError
from hookbus.harnesses.lean.config import load
from hookbus.workers.fanout.dispatcher import Dispatcher
from tests.fanout_helpers import StubRegistry


def test_partition_zero_keeps_today_s_event_and_batch_key_names() -> None:
    assert keys.partition_events("ns", 0) == keys.events("ns") == "hookbus:{ns}:events"
    assert keys.partition_batch("ns", 0, "h") == keys.batch("ns", "h")
    assert keys.partition_batch_lock("ns", 0, "h") == keys.batch_lock("ns", "h")


def test_a_partition_s_event_stream_and_batch_buffers_share_its_slot() -> None:
    slot = key_slot(b"{ns:2}")
    names = [
        keys.partition_events("ns", 2),
        keys.partition_batch("ns", 2, "h"),
        keys.partition_batch_lock("ns", 2, "h"),
    ]
    assert {key_slot(n.encode()) for n in names} == {slot}
    assert keys.partition_events("ns", 2) == Keys.for_partition("ns", 2).events


def test_one_partition_appends_every_event_to_today_s_stream(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    settings = Settings(namespace="ns")
    events = [Event(kind="PostToolUse", session_id=f"s{i}") for i in range(10)]
    eventlog.publish_many(fake_redis, settings, events)
    assert fake_redis.xlen("hookbus:{ns}:events") == 10
    assert fake_redis.keys("hookbus:{ns:*") == []


def test_each_event_goes_to_its_session_s_partition_in_order(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    settings = Settings(namespace="ns", partitions=4)
    events = [
        Event(kind="PostToolUse", session_id=f"s{i % 8}", payload={"i": i}) for i in range(40)
    ]
    ids = eventlog.publish_many(fake_redis, settings, events)
    assert len(ids) == 40
    for p in range(4):
        stored = fake_redis.xrange(keys.partition_events("ns", p))
        mine = [e for e in events if partition_of(e.session_id, 4) == p]
        assert [decode(f[eventlog.EVENT_FIELD], Event).id for _, f in stored] == [
            e.id for e in mine
        ]
    one = Event(kind="Stop", session_id="s3")
    eventlog.publish(fake_redis, settings, one)
    newest = fake_redis.xrevrange(eventlog.stream_of(settings, one), count=1)
    assert decode(newest[0][1][eventlog.EVENT_FIELD], Event).id == one.id


def test_a_dispatcher_reads_its_partition_and_buffers_in_that_partition(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    settings = Settings(namespace="ns", partitions=3)
    d = Dispatcher(settings, StubRegistry([]), bus=fake_redis, rq=fake_redis, partition=2)
    assert d.keys.events == "hookbus:{ns:2}:events"
    assert d.batches.buffer("h") == "hookbus:{ns:2}:batch:h"
    assert d.dead_letters == "hookbus:{ns:2}:dead"  # its partition's; `hookbus dlq` reads all
    assert d.keys.rq_queue == Keys.for_namespace("ns").rq_queue  # one RQ queue


def test_the_agent_cli_hook_reads_the_partition_count_like_the_settings() -> None:
    assert load({}, cwd="/nonexistent").partitions == 1
    assert load({"HOOKBUS_PARTITIONS": "6"}, cwd="/nonexistent").partitions == 6
    with pytest.raises(ConfigError, match="partitions: must be 1 to 1024"):
        load({"HOOKBUS_PARTITIONS": "0"}, cwd="/nonexistent")


def test_the_fanout_metrics_report_every_partition_s_lag(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    from hookbus.workers.fleet.collector import fleet_collector

    settings = Settings(namespace="ns", partitions=3)
    for p in range(3):
        stream = keys.partition_events("ns", p)
        fake_redis.xgroup_create(stream, keys.FANOUT_GROUP, id="0", mkstream=True)
        for _ in range(p + 1):
            fake_redis.xadd(stream, {"e": b"x"})
    collector = fleet_collector(fake_redis, settings, "fanout")
    lag = next(m for m in collector.collect() if m.name == "hookbus_stream_lag")
    events = {s.labels["stream"]: s.value for s in lag.samples if "events" in s.labels["stream"]}
    assert events == {
        "events": 1,
        "events p1": 2,
        "events p2": 3,
    }
