"""Fan-out packs on real processes: the events of one hook from one read of the event log
run in one RQ job, each on its own: a failure is retried and dead-lettered alone, and a
pack whose worker dies goes on after its last finished event."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from hookbus.bus import decision_batch, eventlog, keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event
from hookbus.workers.fleet import dead_letters as dlq
from tests.fanout_helpers import processes, spawn_worker, wait_for, worker_env, write_python_hook


@pytest.fixture
def record_key(namespace: str) -> str:
    return keys.namespace_pattern(namespace).rstrip("*") + "test-record"


def _counts(client: redis.Redis, key: str) -> dict[str, int]:
    return {k.decode(): int(v) for k, v in client.hgetall(key).items()}


def test_a_failing_event_of_a_pack_is_retried_and_dead_lettered_alone(
    real_redis: redis.Redis, real_redis_url: str, namespace: str, tmp_path: Path, record_key: str
) -> None:
    hooks = tmp_path / "hooks"
    write_python_hook(hooks, "choosy", "picky", retries=(1, [0]))
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    events = [Event(kind="PostToolUse", payload={"i": i, "fail": i == 7}) for i in range(20)]
    bad = events[7]
    eventlog.publish_many(real_redis, settings, events)  # in the log before anyone reads
    env = worker_env(real_redis_url, namespace, record_key)
    with processes() as procs:
        procs.append(spawn_worker("fanout", hooks, env))
        procs.append(spawn_worker("rq", hooks, env, "--isolation", "none"))
        wait_for(lambda: dlq.count_dead(real_redis, settings) == 1, 60, "one dead letter")
        wait_for(lambda: len(_counts(real_redis, record_key)) >= 19, 30, "19 runs")
    runs = _counts(real_redis, record_key)
    assert sorted(runs) == sorted(f"picky|{e.id}" for e in events if e is not bad)
    assert set(runs.values()) == {1}  # no neighbour ran again
    tries = _counts(real_redis, record_key + ":tries")
    assert tries[bad.id] == 2  # its try in the pack, then its one retry, alone
    assert all(tries[e.id] == 1 for e in events if e is not bad)
    (dead,) = dlq.list_dead(real_redis, settings)
    assert (dead.hook, dead.event, dead.tries) == ("choosy", bad.id, 2)
    assert "refuses event 7" in (dead.error or "")
    # the events ran in packs: fewer decision-log entries than runs
    logged = decision_batch.logged(real_redis, keys.Keys.for_namespace(namespace).decisions)
    assert len(logged) >= 21 > real_redis.xlen(keys.Keys.for_namespace(namespace).decisions)


def test_a_failing_event_with_no_retries_is_dead_lettered_at_once_and_alone(
    real_redis: redis.Redis, real_redis_url: str, namespace: str, tmp_path: Path, record_key: str
) -> None:
    hooks = tmp_path / "hooks"
    write_python_hook(hooks, "choosy", "picky")
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    events = [Event(kind="PostToolUse", payload={"i": i, "fail": i in (3, 11)}) for i in range(15)]
    eventlog.publish_many(real_redis, settings, events)
    env = worker_env(real_redis_url, namespace, record_key)
    with processes() as procs:
        procs.append(spawn_worker("fanout", hooks, env))
        procs.append(spawn_worker("rq", hooks, env, "--isolation", "none"))
        wait_for(lambda: dlq.count_dead(real_redis, settings) == 2, 60, "two dead letters")
        wait_for(lambda: len(_counts(real_redis, record_key)) >= 13, 30, "13 runs")
    dead = dlq.list_dead(real_redis, settings)
    assert sorted(d.event for d in dead) == sorted([events[3].id, events[11].id])
    assert {d.tries for d in dead} == {1}
    shown = dlq.show_dead(real_redis, settings, dead[0].id)
    assert "RuntimeError" in shown["traceback"]
    tries = _counts(real_redis, record_key + ":tries")
    assert set(tries.values()) == {1}


def test_a_pack_whose_worker_dies_goes_on_after_its_last_finished_event(
    real_redis: redis.Redis, real_redis_url: str, namespace: str, tmp_path: Path, record_key: str
) -> None:
    hooks = tmp_path / "hooks"
    write_python_hook(hooks, "dies", "dies_once")
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    events = [Event(kind="PostToolUse", payload={"i": i, "die": i == 10}) for i in range(20)]
    eventlog.publish_many(real_redis, settings, events)
    env = worker_env(real_redis_url, namespace, record_key)
    with processes() as procs:
        procs.append(spawn_worker("fanout", hooks, env))
        procs.append(spawn_worker("rq", hooks, env, "--isolation", "none"))
        wait_for(lambda: real_redis.hexists(record_key + ":died", "once"), 30, "the worker to die")
        wait_for(lambda: len(_counts(real_redis, record_key)) >= 20, 60, "every event to run")
    runs = _counts(real_redis, record_key)
    assert sorted(runs) == sorted(f"dies|{e.id}" for e in events)
    assert set(runs.values()) == {1}, runs  # the ten before the death did not run again
