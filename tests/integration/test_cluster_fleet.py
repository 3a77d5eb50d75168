"""Events and reload on a 3-master local Redis Cluster (issue 16 points 2, 3 and 5).

Fan-out: ``hookbus worker --role fanout`` and ``--role rq`` on a cluster bus, RQ on a plain
server of its own (``HOOKBUS_RQ__REDIS_URL``, RQ does not support Cluster): every published
event runs every hook once. Reload: chain workers serving 3 partitions on 3 masters follow a
bundle pushed to the cluster, on every partition.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hookbus import HookBus
from hookbus.authoring import release
from hookbus.bus.connection import bus_client
from hookbus.bus.keys import partition_of
from hookbus.bus.settings.loader import ReloadSettings, Settings, WorkerSettings
from hookbus.bus.wire import Decision, Event
from hookbus.workers.reload.acks import wait_for_acks
from tests.cluster_fixture import (
    LocalCluster,
    LocalServer,
    local_cluster,
    local_server,
    namespace_spread,
)
from tests.fanout_helpers import processes, spawn_worker, wait_for, worker_env, write_python_hook
from tests.reload_helpers import Fleet, ran, replace_hooks, write_hook


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with local_cluster(3) as started:
        yield started


@pytest.fixture(scope="module")
def rq_server() -> Iterator[LocalServer]:
    with local_server() as started:
        yield started


def test_every_event_published_on_a_cluster_runs_every_hook_once_with_rq_on_its_own_redis(
    cluster: LocalCluster, rq_server: LocalServer, tmp_path: Path
) -> None:
    ns = namespace_spread(cluster.url, 1, prefix="ev")
    hooks = tmp_path / "hooks"
    write_python_hook(hooks, "alpha", "record")
    write_python_hook(hooks, "beta", "record")
    record_key = f"record:{ns}"
    env = worker_env(cluster.url, ns, record_key)
    env.update(HOOKBUS_RQ__REDIS_URL=rq_server.url, FANOUT_RECORD_URL=rq_server.url)
    settings = Settings(redis_url=cluster.url, namespace=ns)
    settings = Settings(
        redis_url=cluster.url, namespace=ns, rq=settings.rq.__class__(redis_url=rq_server.url)
    )
    recorded = rq_server.client()
    with processes() as procs:
        procs.append(spawn_worker("fanout", hooks, env))
        procs.append(spawn_worker("rq", hooks, env, "--isolation", "none"))
        with HookBus(settings) as bus:
            sent = [
                bus.publish(Event(kind="PostToolUse", session_id=f"s{i}", payload={"i": i}))
                for i in range(20)
            ]

        def counts() -> dict[str, int]:
            raw = recorded.hgetall(record_key)
            return {k.decode(): int(v) for k, v in raw.items()}

        wait_for(lambda: len(counts()) == 40, 60, "every hook ran on every event", counts)
    got = counts()
    assert got == {f"{hook}|{event_id}": 1 for hook in ("alpha", "beta") for event_id in sent}
    recorded.close()


@pytest.mark.parametrize("role", ["rq", "fanout"])
def test_an_rq_or_fanout_worker_started_with_rq_on_the_cluster_says_rq_needs_a_plain_redis(
    role: str, cluster: LocalCluster, tmp_path: Path
) -> None:
    hooks = tmp_path / "hooks"
    write_python_hook(hooks, "alpha", "record")
    env = worker_env(cluster.url, "rqrefused", "unused")  # no HOOKBUS_RQ__REDIS_URL
    done = subprocess.run(
        [sys.executable, "-m", "hookbus", "worker", "--role", role, "--hooks-dir", str(hooks)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode not in (0, 2), done.stderr
    assert "RQ does not support Redis Cluster" in done.stderr
    assert "HOOKBUS_RQ__REDIS_URL" in done.stderr


def _ask(bus: HookBus, session: str) -> Decision:
    return bus.request(
        Event(kind="PreToolUse", session_id=session, payload={"tool_name": "Bash"}),
        deadline_ms=3_000,
    )


def test_a_reload_reaches_the_chain_workers_of_every_partition_on_every_master(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    ns = namespace_spread(cluster.url, 3, prefix="rl")
    settings = Settings(
        redis_url=cluster.url,
        namespace=ns,
        partitions=3,
        reload=ReloadSettings(data_dir=str(tmp_path / "data"), bundle_history=100),
        workers=WorkerSettings(heartbeat_interval_ms=200, dead_after_ms=3_000),
    )
    hooks = tmp_path / "hooks"
    write_hook(hooks, "alpha")
    client = bus_client(settings)
    release.release_folder(client, settings, hooks)
    fleet = Fleet(cluster.url, settings, hooks, tmp_path / "worker-data")
    fleet.env["HOOKBUS_PARTITIONS"] = "3"
    # one session per partition
    sessions: dict[int, str] = {}
    i = 0
    while len(sessions) < 3:
        sessions.setdefault(partition_of(f"sess{i}", 3), f"sess{i}")
        i += 1
    try:
        fleet.start(2, client)  # each: 3 partition loops (ids <id>, <id>.p1, <id>.p2)
        with HookBus(settings) as bus:
            before = [_ask(bus, s) for s in sessions.values()]
            replace_hooks(hooks, "beta")
            v2 = release.release_folder(client, settings, hooks).version
            assert wait_for_acks(client, settings, v2, timeout_s=10).ok
            after = [_ask(bus, s) for s in sessions.values()]
    finally:
        fleet.stop()
    assert [ran(d) for d in before] == [["ran:static", "ran:alpha"]] * 3
    assert [ran(d) for d in after] == [["ran:static", "ran:beta"]] * 3
    assert {d.bundle_version for d in after} == {v2}
    assert not any(d.degraded for d in before + after)


def test_hookbus_status_reads_the_fleet_of_a_namespace_on_a_cluster(
    cluster: LocalCluster, rq_server: LocalServer, tmp_path: Path
) -> None:
    ns = namespace_spread(cluster.url, 1, prefix="st")
    settings = Settings(redis_url=cluster.url, namespace=ns)
    fleet = Fleet(cluster.url, settings, tmp_path / "hooks", tmp_path / "worker-data")
    write_hook(tmp_path / "hooks", "alpha")
    env = dict(fleet.env, HOOKBUS_RQ__REDIS_URL=rq_server.url)
    try:
        (worker_id,) = fleet.start(1, bus_client(settings))
        done = subprocess.run(
            [sys.executable, "-m", "hookbus", "status", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        fleet.stop()
    assert done.returncode == 0, done.stderr
    assert worker_id in done.stdout
