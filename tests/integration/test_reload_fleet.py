"""Reloads across real chain worker processes on the real server.

Each worker (see ``tests.reload_helpers.run_worker_main``) has one static hook
(``ran:static``) and follows bundles; bundle hooks add ``ran:<name>`` context, so a
decision's context says exactly which hook set answered it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from hookbus import HookBus
from hookbus.authoring import release
from hookbus.bundles import store as bundle_store
from hookbus.bus.keys import Keys
from hookbus.bus.settings.loader import ReloadSettings, Settings, WorkerSettings
from hookbus.bus.wire import Decision, Event
from hookbus.errors import SecurityViolation
from hookbus.workers.reload.acks import wait_for_acks
from tests.reload_helpers import Fleet, ran, replace_hooks, write_hook, write_shell_hook

#: Generous: the machine is shared; these tests check which hooks ran, not latency.
DEADLINE_MS = 3_000


@pytest.fixture
def settings(namespace: str, real_redis_url: str, tmp_path: Path) -> Settings:
    return Settings(
        redis_url=real_redis_url,
        namespace=namespace,
        reload=ReloadSettings(data_dir=str(tmp_path / "data"), bundle_history=100),
        workers=WorkerSettings(heartbeat_interval_ms=200, dead_after_ms=3_000),
    )


@pytest.fixture
def hooks(tmp_path: Path) -> Path:
    root = tmp_path / "hooks"
    write_hook(root, "alpha")
    return root


@pytest.fixture
def fleet(
    real_redis: redis.Redis, real_redis_url: str, settings: Settings, hooks: Path, tmp_path: Path
) -> Iterator[Fleet]:
    f = Fleet(real_redis_url, settings, hooks, tmp_path / "worker-data")
    yield f
    f.stop()


@pytest.fixture
def bus(settings: Settings) -> Iterator[HookBus]:
    with HookBus(settings) as b:
        yield b


def ask(bus: HookBus) -> Decision:
    return bus.request(
        Event(kind="PreToolUse", payload={"tool_name": "Bash"}), deadline_ms=DEADLINE_MS
    )


def answers_from_every_worker(bus: HookBus, workers: list[str]) -> dict[str, Decision]:
    """Ask until every worker answered once after now, for up to 15 s: a worker that just
    started reads once it holds a reader slot (within a rebalance round, a second), and a
    fast fleet answers hundreds of requests before that."""
    seen: dict[str, Decision] = {}
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        d = ask(bus)
        assert not d.degraded, d.reason
        if d.worker is not None and d.worker not in seen:
            seen[d.worker] = d
        if set(workers) <= set(seen):
            return seen
    raise AssertionError(f"only {sorted(seen)} of {workers} answered")


def test_a_reload_changes_the_decisions_of_every_worker(
    fleet: Fleet, real_redis: redis.Redis, settings: Settings, hooks: Path, bus: HookBus
) -> None:
    v1 = release.release_folder(real_redis, settings, hooks).version
    workers = fleet.start(2, real_redis)
    for d in answers_from_every_worker(bus, workers).values():
        assert ran(d) == ["ran:static", "ran:alpha"]
        assert d.bundle_version == v1
    replace_hooks(hooks, "beta")
    v2 = release.release_folder(real_redis, settings, hooks).version
    assert wait_for_acks(real_redis, settings, v2, timeout_s=10).ok
    for d in answers_from_every_worker(bus, workers).values():
        assert ran(d) == ["ran:static", "ran:beta"], "old hook gone, new one runs, static stays"
        assert d.bundle_version == v2
        assert [r.hook_id for r in d.trace] == ["static-guard", "beta"]


def test_fifty_reloads_under_continuous_load_give_no_errors_and_no_mixed_sets(
    fleet: Fleet, real_redis: redis.Redis, settings: Settings, hooks: Path, bus: HookBus
) -> None:
    expected: dict[str, list[str]] = {}
    first = release.release_folder(real_redis, settings, hooks).version
    expected[first] = ["ran:static", "ran:alpha"]
    workers = fleet.start(2, real_redis)
    decisions: list[Decision] = []
    stop = threading.Event()

    def load() -> None:
        while not stop.is_set():
            decisions.append(ask(bus))

    producer = threading.Thread(target=load, daemon=True)
    producer.start()
    not_acked = 0
    try:
        for i in range(50):
            replace_hooks(hooks, f"v{i}")
            result = release.release_folder(real_redis, settings, hooks)
            expected[result.version] = ["ran:static", f"ran:v{i}"]
            report = wait_for_acks(real_redis, settings, result.version, timeout_s=5)
            not_acked += 0 if report.ok else 1
    finally:
        stop.set()
        producer.join(timeout=10)
    assert not_acked == 0
    assert len(decisions) > 50
    assert {d.worker for d in decisions} == set(workers)
    assert len({d.bundle_version for d in decisions}) >= 10, "requests ran across many sets"
    degraded = [d.reason for d in decisions if d.degraded]
    assert degraded == []
    for d in decisions:
        assert d.outcome == "allow"
        assert d.bundle_version in expected
        assert ran(d) == expected[d.bundle_version], "the context matches the bundle version"
        hook_ids = ["static-guard", expected[d.bundle_version][1].removeprefix("ran:")]
        assert [r.hook_id for r in d.trace] == hook_ids
        assert all(r.error is None for r in d.trace)


def _kill_subscribers(client: redis.Redis, namespace: str) -> int:
    """CLIENT KILL the reload subscribers of this namespace's workers only (found by the
    client name HookHost sets), never anybody else's connections."""
    prefix = f"hookbus-reload.{namespace}."
    killed = 0
    for entry in client.client_list(_type="pubsub"):
        if str(entry.get("name", "")).startswith(prefix):
            client.client_kill_filter(_id=entry["id"])
            killed += 1
    return killed


def test_a_worker_whose_subscriber_was_killed_catches_up_within_two_seconds(
    fleet: Fleet, real_redis: redis.Redis, settings: Settings, hooks: Path, bus: HookBus
) -> None:
    v1 = release.release_folder(real_redis, settings, hooks).version
    fleet.start(1, real_redis)
    assert ask(bus).bundle_version == v1
    assert _kill_subscribers(real_redis, settings.namespace) == 1
    replace_hooks(hooks, "beta")
    v2 = release.release_folder(real_redis, settings, hooks).version
    pushed = time.monotonic()
    while True:
        d = ask(bus)
        if d.bundle_version == v2:
            break
        assert time.monotonic() - pushed < 2.0, "still on the old version after 2 s"
        time.sleep(0.02)
    assert ran(d) == ["ran:static", "ran:beta"]


def test_a_bundle_with_a_critical_finding_is_refused_and_the_fleet_keeps_the_old_set(
    fleet: Fleet, real_redis: redis.Redis, settings: Settings, hooks: Path, bus: HookBus
) -> None:
    v1 = release.release_folder(real_redis, settings, hooks).version
    workers = fleet.start(1, real_redis)
    write_shell_hook(hooks, "evil", "rm -rf /")
    with pytest.raises(SecurityViolation, match="rm-rf"):
        release.release_folder(real_redis, settings, hooks)
    assert bundle_store.current_version(real_redis, Keys.for_namespace(settings.namespace)) == v1
    time.sleep(1.2)  # one stamp poll period: a worker that wrongly followed would show it
    for d in answers_from_every_worker(bus, workers).values():
        assert d.bundle_version == v1
        assert ran(d) == ["ran:static", "ran:alpha"]


def test_rollback_restores_the_earlier_decisions(
    fleet: Fleet, real_redis: redis.Redis, settings: Settings, hooks: Path, bus: HookBus
) -> None:
    v1 = release.release_folder(real_redis, settings, hooks).version
    fleet.start(1, real_redis)
    replace_hooks(hooks, "beta")
    v2 = release.release_folder(real_redis, settings, hooks).version
    assert wait_for_acks(real_redis, settings, v2, timeout_s=10).ok
    assert ran(ask(bus)) == ["ran:static", "ran:beta"]
    back = bundle_store.rollback(real_redis, settings)
    assert back.version == v1
    assert wait_for_acks(real_redis, settings, v1, timeout_s=10).ok
    d = ask(bus)
    assert d.bundle_version == v1
    assert ran(d) == ["ran:static", "ran:alpha"]


def test_a_worker_started_after_a_reload_serves_the_current_version_from_its_first_request(
    fleet: Fleet, real_redis: redis.Redis, settings: Settings, hooks: Path, bus: HookBus
) -> None:
    release.release_folder(real_redis, settings, hooks)
    replace_hooks(hooks, "beta")
    v2 = release.release_folder(real_redis, settings, hooks).version
    replace_hooks(hooks, "gamma")  # the worker's own --hooks-dir differs from the bundle
    fleet.start(1, real_redis)
    first = ask(bus)
    assert first.bundle_version == v2
    assert ran(first) == ["ran:static", "ran:beta"]
