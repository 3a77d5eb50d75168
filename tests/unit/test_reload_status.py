"""Ack waiting and fleet snapshots on fakeredis."""

from __future__ import annotations

import json

import fakeredis

from hookbus.bus.keys import Keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import now_ms
from hookbus.workers.fleet.status import gather
from hookbus.workers.reload.acks import Ack, wait_for_acks

SETTINGS = Settings(namespace="unitstatus")
KEYS = Keys.for_namespace("unitstatus")


def beat(client: fakeredis.FakeRedis, wid: str, version: str | None, age_ms: int = 0) -> None:
    entry = {
        "id": wid,
        "role": "chain",
        "host": "h",
        "pid": 1,
        "started_ms": now_ms() - 60_000,
        "last_ms": now_ms() - age_ms,
        "version": version,
        "hooks": 2,
        "problems": [],
    }
    client.hset(KEYS.workers, wid, json.dumps(entry))


def test_dead_workers_do_not_hold_up_an_ack_wait(fake_redis: fakeredis.FakeRedis) -> None:
    beat(fake_redis, "live", "v2")
    beat(fake_redis, "dead", "v1", age_ms=60_000)
    seen: list[Ack] = []
    report = wait_for_acks(fake_redis, SETTINGS, "v2", timeout_s=2, on_ack=seen.append)
    assert report.ok
    assert [a.worker.id for a in report.acks] == ["live"]
    assert [a.worker.id for a in seen] == ["live"]
    assert report.last_ack_ms is not None and report.waited_ms < 2000


def test_a_live_worker_on_another_version_fails_the_wait_after_the_timeout(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    beat(fake_redis, "a", "v2")
    beat(fake_redis, "b", "v1")
    report = wait_for_acks(fake_redis, SETTINGS, "v2", timeout_s=0.1)
    assert not report.ok
    assert {a.worker.id: a.switched for a in report.acks} == {"a": True, "b": False}
    assert report.waited_ms >= 100
    assert report.acks[1].to_dict()["after_ms"] is None


def test_no_live_worker_means_nothing_to_wait_for(fake_redis: fakeredis.FakeRedis) -> None:
    report = wait_for_acks(fake_redis, SETTINGS, "v2", timeout_s=1)
    assert report.ok
    assert report.acks == []
    assert report.last_ack_ms is None


def test_a_snapshot_shows_uptime_and_last_beat_and_marks_the_dead(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    fake_redis.set(KEYS.bundle_stamp, "v9")
    beat(fake_redis, "fresh", "v9")
    beat(fake_redis, "silent", "v8", age_ms=10_000)
    snapshot = gather(fake_redis, SETTINGS)
    assert snapshot.bundle_version == "v9"
    assert snapshot.bundle is None, "the stamp names a bundle that is not stored"
    rows = {w.info.id: w for w in snapshot.workers}
    assert rows["fresh"].alive and not rows["silent"].alive
    assert rows["silent"].last_seen_ms >= 10_000
    assert rows["fresh"].uptime_ms >= 59_000
    data = snapshot.to_dict()
    assert data["bundle"]["version"] == "v9"
    assert {w["id"] for w in data["workers"]} == {"fresh", "silent"}
