"""Liveness on Redis's clock only: a worker's host clock never decides whether it is alive.

Workers run under ``faketime`` (their whole process, monotonic clock included, shifted).
A healthy worker 45 s behind must be seen alive by producers and ``status``; a dead one
whose clock ran 45 s ahead must be seen dead once ``dead_after_ms`` has passed since its
last beat, not 45 s later.
"""

from __future__ import annotations

import time

import redis

from hookbus import HookBus
from hookbus.bus.keys import Keys
from hookbus.bus.settings.loader import load_settings
from hookbus.bus.wire import Event
from hookbus.workers.fleet.heartbeat import alive_workers
from hookbus.workers.fleet.status import gather
from tests.worst_day_helpers import chain_workers, faketime_prefix, kill

#: The producers' and status's liveness threshold in these tests, in ms.
DEAD_AFTER_MS = 2_000


def settings_for(url: str, ns: str):  # type: ignore[no-untyped-def]
    overrides = {"redis_url": url, "namespace": ns, "workers": {"dead_after_ms": DEAD_AFTER_MS}}
    return load_settings(overrides=overrides).settings


def test_a_healthy_worker_45_s_behind_is_alive_and_answers(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    settings = settings_for(real_redis_url, namespace)
    with chain_workers(real_redis_url, namespace, prefix=faketime_prefix("-45s")):
        time.sleep(1.5)  # a beat or two later
        bus = HookBus(settings)
        try:
            decisions = [
                bus.request(Event(kind="PreToolUse", payload={"act": "deny"}), deadline_ms=2_000)
                for _ in range(20)
            ]
        finally:
            bus.close()
        reasons = {d.reason for d in decisions}
        assert all(not d.degraded for d in decisions), reasons
        assert reasons == {"guard says no"}
        snapshot = gather(real_redis, settings, prune=False)
        assert [w.alive for w in snapshot.workers] == [True]
        assert snapshot.workers[0].last_seen_ms < 1_500


def test_a_dead_worker_45_s_ahead_is_dead_after_dead_after_ms(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    settings = settings_for(real_redis_url, namespace)
    keys = Keys.for_namespace(namespace)
    with chain_workers(real_redis_url, namespace, prefix=faketime_prefix("+45s")) as procs:
        assert len(alive_workers(real_redis, keys, dead_after_ms=DEAD_AFTER_MS)) == 1
        kill(procs[0])
        killed = time.monotonic()
        time.sleep(DEAD_AFTER_MS / 1000 + 1.2)  # past dead_after_ms (the last beat <= 1 s ago)
        assert alive_workers(real_redis, keys, dead_after_ms=DEAD_AFTER_MS) == []
        snapshot = gather(real_redis, settings, prune=False)
        assert [w.alive for w in snapshot.workers] == [False]
        assert snapshot.workers[0].last_seen_ms >= DEAD_AFTER_MS
        bus = HookBus(settings)
        try:
            sent = time.monotonic()
            decision = bus.request(Event(kind="PreToolUse"), deadline_ms=3_000)
            took = time.monotonic() - sent
        finally:
            bus.close()
        assert decision.degraded
        assert "no chain worker alive" in (decision.reason or ""), decision.reason
        assert took < 1.0, f"the caller waited {took:.2f} s for a worker dead since {killed}"
