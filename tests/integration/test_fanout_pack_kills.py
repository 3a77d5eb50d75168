"""Packs whose RQ worker is SIGKILLed, on real worker processes: each event's outcome is
durable before the next event runs, so a killed pack resumes where it stopped, a failed
event is still dead-lettered, a poison event that kills every worker is dead-lettered by
its own id while the rest of its pack runs, and no run is missing from the decision log."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import pytest
import redis

from hookbus.bus import decision_batch, eventlog, keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event
from hookbus.workers.fleet import dead_letters as dlq
from tests.fanout_helpers import (
    kill,
    processes,
    spawn_worker,
    wait_for,
    worker_env,
    write_python_hook,
)

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def record_key(namespace: str) -> str:
    return keys.namespace_pattern(namespace).rstrip("*") + "test-record"


def _counts(client: redis.Redis, key: str) -> dict[str, int]:
    return {k.decode(): int(v) for k, v in client.hgetall(key).items()}


def _logged_runs(client: redis.Redis, namespace: str, hook: str) -> Counter[str]:
    """Event id -> how many ``hook_run`` records of ``hook`` the decision log holds."""
    stream = keys.Keys.for_namespace(namespace).decisions
    return Counter(
        r[b"id"].decode()
        for r in decision_batch.logged(client, stream)
        if r.get(b"type") == b"hook_run" and r.get(b"hook") == hook.encode()
    )


class _RQWorkers:
    """One RQ worker at a time, started again whenever it died (as a supervisor would)."""

    def __init__(
        self,
        procs: list[subprocess.Popen[bytes]],
        hooks: Path,
        env: dict[str, str],
        isolation: str = "none",
    ) -> None:
        self.procs, self.hooks, self.env, self.isolation = procs, hooks, env, isolation
        self.current = self._start()
        self.deaths = 0

    def _start(self) -> subprocess.Popen[bytes]:
        proc = spawn_worker("rq", self.hooks, self.env, "--isolation", self.isolation)
        self.procs.append(proc)
        return proc

    def keep_alive(self) -> None:
        if self.current.poll() is not None:
            self.deaths += 1
            self.current = self._start()

    def kill(self) -> None:
        kill(self.current)
        self.keep_alive()


def test_a_failed_event_is_dead_lettered_although_its_worker_dies_later_in_the_pack(
    real_redis: redis.Redis, real_redis_url: str, namespace: str, tmp_path: Path, record_key: str
) -> None:
    hooks = tmp_path / "hooks"
    write_python_hook(hooks, "fickle", "fails_then_dies")  # no retries
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    events = [
        Event(kind="PostToolUse", payload={"i": i, "fail": i == 3, "die": i == 12})
        for i in range(20)
    ]
    eventlog.publish_many(real_redis, settings, events)
    env = worker_env(real_redis_url, namespace, record_key)
    with processes() as procs:
        procs.append(spawn_worker("fanout", tmp_path / "hooks", env))
        rq = _RQWorkers(procs, hooks, env)

        def done() -> bool:
            rq.keep_alive()
            return len(_counts(real_redis, record_key)) >= 19

        wait_for(done, 90, "19 runs", lambda: _counts(real_redis, record_key))
        wait_for(
            lambda: dlq.count_dead(real_redis, settings) >= 1,
            30,
            "the failed event's dead letter",
            lambda: dlq.list_dead(real_redis, settings),
        )
    dead = dlq.list_dead(real_redis, settings)
    assert [(d.hook, d.event) for d in dead] == [("fickle", events[3].id)]
    assert "fickle hook refuses event 3" in (dead[0].error or "")
    runs = _counts(real_redis, record_key)
    assert sorted(runs) == sorted(f"fickle|{e.id}" for i, e in enumerate(events) if i != 3)
    assert set(runs.values()) == {1}
    tries = _counts(real_redis, record_key + ":tries")
    assert tries[events[3].id] == 1  # not run again after the death
    assert _logged_runs(real_redis, namespace, "fickle") == Counter(e.id for e in events)


@pytest.mark.parametrize("isolation", ["none", "fork"])
def test_a_poison_event_is_dead_lettered_by_its_own_id_and_the_rest_of_its_pack_runs(
    real_redis: redis.Redis,
    real_redis_url: str,
    namespace: str,
    tmp_path: Path,
    record_key: str,
    isolation: str,
) -> None:
    hooks = tmp_path / "hooks"
    write_python_hook(hooks, "toxic", "poison")
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    events = [Event(kind="PostToolUse", payload={"i": i, "poison": i == 5}) for i in range(20)]
    bad = events[5]
    eventlog.publish_many(real_redis, settings, events)
    env = worker_env(real_redis_url, namespace, record_key)
    with processes() as procs:
        procs.append(spawn_worker("fanout", hooks, env))
        rq = _RQWorkers(procs, hooks, env, isolation)

        def done() -> bool:
            rq.keep_alive()
            return len(_counts(real_redis, record_key)) >= 19

        wait_for(done, 150, "the 19 good events to run", lambda: _counts(real_redis, record_key))
        wait_for(
            lambda: dlq.count_dead(real_redis, settings) >= 1,
            30,
            "the poison event's dead letter",
            lambda: dlq.list_dead(real_redis, settings),
        )
    runs = _counts(real_redis, record_key)
    assert sorted(runs) == sorted(f"poison|{e.id}" for e in events if e is not bad)
    assert set(runs.values()) == {1}
    dead = dlq.list_dead(real_redis, settings)
    assert [(d.hook, d.event) for d in dead] == [("toxic", bad.id)]
    assert "killed its worker" in (dead[0].error or "")
    tries = _counts(real_redis, record_key + ":tries")
    assert tries[bad.id] == 3  # it killed three workers, and was then left out
    logged = _logged_runs(real_redis, namespace, "toxic")
    assert logged == Counter(e.id for e in events)


def test_three_kills_in_one_pack_lose_double_and_misattribute_nothing(
    real_redis: redis.Redis, real_redis_url: str, namespace: str, tmp_path: Path, record_key: str
) -> None:
    hooks = tmp_path / "hooks"
    write_python_hook(hooks, "paced", "steady")
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    slow = (20, 45, 70)
    events = [Event(kind="PostToolUse", payload={"i": i, "slow": i in slow}) for i in range(100)]
    eventlog.publish_many(real_redis, settings, events)
    env = worker_env(real_redis_url, namespace, record_key)
    with processes() as procs:
        procs.append(spawn_worker("fanout", hooks, env))
        rq = _RQWorkers(procs, hooks, env)
        for i in slow:
            # the worker is killed in the middle of event i, every event before it done
            wait_for(
                lambda i=i: (
                    rq.keep_alive() is None
                    and real_redis.get(record_key + ":at") == events[i].id.encode()
                ),
                90,
                f"event {i} to start",
                lambda: len(_counts(real_redis, record_key)),
            )
            rq.kill()
            real_redis.delete(record_key + ":at")

        def done() -> bool:
            rq.keep_alive()
            return len(_counts(real_redis, record_key)) >= 100

        wait_for(done, 90, "every event to run", lambda: len(_counts(real_redis, record_key)))
        assert rq.deaths == 3
    runs = _counts(real_redis, record_key)
    assert sorted(runs) == sorted(f"steady|{e.id}" for e in events)
    assert set(runs.values()) == {1}
    assert dlq.count_dead(real_redis, settings) == 0
    wait_for(
        lambda: sum(_logged_runs(real_redis, namespace, "paced").values()) >= 100,
        10,
        "every run in the decision log",
    )
    assert _logged_runs(real_redis, namespace, "paced") == Counter(e.id for e in events)
