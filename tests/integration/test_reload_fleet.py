"""Reloads across real chain worker processes on the real server.

Each worker (see ``tests.reload_helpers.run_worker_main``) has one static hook
(``ran:static``) and follows bundles; bundle hooks add ``ran:<name>`` context, so a
decision's context says exactly which hook set answered it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
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
from hookbus.workers.fleet.heartbeat import list_workers
from hookbus.workers.reload.acks import wait_for_acks
from tests.reload_helpers import write_hook, write_shell_hook

ROOT = Path(__file__).resolve().parents[2]
#: Generous: the machine is shared; these tests check which hooks ran, not latency.
DEADLINE_MS = 3_000
START_TIMEOUT_S = 30.0


class Fleet:
    """Chain worker processes on one namespace, stopped (SIGTERM, then SIGKILL) at the end."""

    def __init__(self, url: str, settings: Settings, hooks_dir: Path, data_dir: Path) -> None:
        self.url = url
        self.settings = settings
        self.hooks_dir = hooks_dir
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
        self.env.update(
            HOOKBUS_REDIS_URL=url,
            HOOKBUS_NAMESPACE=settings.namespace,
            HOOKBUS_RELOAD__DATA_DIR=str(data_dir),
            HOOKBUS_WORKERS__HEARTBEAT_INTERVAL_MS="200",
            PYTHONPATH=str(ROOT),
        )
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, n: int, client: redis.Redis) -> list[str]:
        """Start ``n`` workers and wait for their first heartbeats; returns their ids."""
        keys = Keys.for_namespace(self.settings.namespace)
        before = {w.id for w in list_workers(client, keys)}
        for _ in range(n):
            self.procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-c",
                        "from tests.reload_helpers import run_worker_main; run_worker_main()",
                        str(self.hooks_dir),
                    ],
                    cwd=ROOT,
                    env=self.env,
                )
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            new = [w.id for w in list_workers(client, keys) if w.id not in before]
            if len(new) >= n:
                return new
            time.sleep(0.05)
        raise AssertionError(f"{n} workers did not start within {START_TIMEOUT_S}s")

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)


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


def ran(decision: Decision) -> list[str]:
    return [c for c in decision.context if c.startswith("ran:")]


def replace_hooks(root: Path, *names: str) -> None:
    for child in root.iterdir():
        for f in child.iterdir():
            f.unlink()
        child.rmdir()
    for name in names:
        write_hook(root, name)


def answers_from_every_worker(bus: HookBus, workers: list[str]) -> dict[str, Decision]:
    """Ask until every worker answered once after now (bounded)."""
    seen: dict[str, Decision] = {}
    for _ in range(400):
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
