"""Heartbeats: the contract other parts and producers read."""

from __future__ import annotations

import json
import time

import fakeredis

from hookbus.bus.keys import Keys
from hookbus.workers.fleet.heartbeat import (
    HEARTBEAT_FIELDS,
    Heartbeat,
    WorkerInfo,
    alive_workers,
    list_workers,
    prune_dead,
)


def test_a_started_heartbeat_writes_every_contract_field_at_once(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    keys = Keys.for_namespace("hb")
    beat = Heartbeat(
        fake_redis,
        keys,
        role="chain",
        interval_ms=60_000,
        info=lambda: {"version": "v1", "hooks": 3, "problems": ["x: bad"]},
    )
    beat.record(2.0, error=False)
    beat.record(4.0, error=True)
    beat.start()
    try:
        raw = fake_redis.hget(keys.workers, beat.worker_id)
        assert raw is not None
        data = json.loads(raw)
        assert set(HEARTBEAT_FIELDS) <= set(data)
        assert data["role"] == "chain"
        assert data["version"] == "v1"
        assert data["hooks"] == 3
        assert data["problems"] == ["x: bad"]
        assert data["processed"] == 2
        assert data["errors"] == 1
    finally:
        beat.stop()


def test_a_clean_stop_removes_the_entry(fake_redis: fakeredis.FakeRedis) -> None:
    keys = Keys.for_namespace("hb")
    beat = Heartbeat(fake_redis, keys, role="fanout", interval_ms=60_000, info=dict)
    beat.start()
    assert [w.id for w in list_workers(fake_redis, keys)] == [beat.worker_id]
    beat.stop()
    assert list_workers(fake_redis, keys) == []


def test_the_beat_thread_refreshes_last_ms(fake_redis: fakeredis.FakeRedis) -> None:
    keys = Keys.for_namespace("hb")
    beat = Heartbeat(fake_redis, keys, role="chain", interval_ms=10, info=dict)
    beat.start()
    try:
        first = list_workers(fake_redis, keys)[0].last_ms
        end = time.monotonic() + 2
        while time.monotonic() < end and list_workers(fake_redis, keys)[0].last_ms == first:
            time.sleep(0.005)
        assert list_workers(fake_redis, keys)[0].last_ms > first
    finally:
        beat.stop()


def test_alive_and_prune_judge_by_the_last_beat(fake_redis: fakeredis.FakeRedis) -> None:
    keys = Keys.for_namespace("hb")
    now = int(time.time() * 1000)
    fresh = {"id": "a", "role": "chain", "last_ms": now}
    stale = {"id": "b", "role": "chain", "last_ms": now - 60_000}
    other = {"id": "c", "role": "rq", "last_ms": now}
    for entry in (fresh, stale, other):
        fake_redis.hset(keys.workers, entry["id"], json.dumps(entry))
    fake_redis.hset(keys.workers, "junk", b"not json")
    alive = alive_workers(fake_redis, keys, dead_after_ms=5_000, role="chain")
    assert [w.id for w in alive] == ["a"]
    assert prune_dead(fake_redis, keys, prune_after_ms=30_000) == ["b"]
    assert sorted(w.id for w in list_workers(fake_redis, keys)) == ["a", "c"]


def test_unknown_fields_of_newer_workers_are_kept_as_extra() -> None:
    info = WorkerInfo.parse("w", json.dumps({"id": "w", "role": "chain", "shiny": 1}))
    assert info is not None
    assert info.extra == {"shiny": 1}
    assert info.to_dict()["shiny"] == 1
