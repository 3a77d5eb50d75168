"""Partitioned event streams on a 3-master local Redis Cluster (issue 16 points 2 and 5).

A namespace with 3 partitions whose slots sit on the 3 masters: producers append each event
to its session's partition on the master serving it, dispatchers read every partition on
its own master, RQ lives on a plain server of its own. Every event runs its hook once, one
session's events in order, and ``hookbus status`` reads every partition's lag on its master.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from typer.testing import CliRunner

from hookbus import AsyncHookBus, HookBus
from hookbus.bus import eventlog
from hookbus.bus.connection import bus_client, connect, node_url, partition_client
from hookbus.bus.keys import FANOUT_GROUP, Keys, partition_of
from hookbus.bus.settings.loader import RQSettings, Settings
from hookbus.bus.wire import Event
from hookbus.cli.lean import prepare_event, send_event
from tests.cluster_fixture import LocalCluster, LocalServer, local_cluster, local_server
from tests.cluster_fixture import namespace_spread as spread
from tests.fanout_helpers import (
    processes,
    queued_events,
    spawn_python,
    spawn_worker,
    wait_for,
    worker_env,
)
from tests.partition_helpers import (
    DYING_DISPATCHER,
    RESTARTED_DISPATCHER,
    Recorder,
    counts,
    lengths,
    order_of,
    run_jobs,
    sessions_covering,
    start_dispatchers,
    status_app,
    stop_dispatchers,
    write_order_hook,
)

PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with local_cluster(3) as started:
        yield started


@pytest.fixture(scope="module")
def rq_server() -> Iterator[LocalServer]:
    with local_server() as started:
        yield started


def cluster_settings(cluster: LocalCluster, rq_server: LocalServer, prefix: str) -> Settings:
    ns = spread(cluster.url, PARTITIONS, prefix=prefix)
    return Settings(
        redis_url=cluster.url,
        namespace=ns,
        partitions=PARTITIONS,
        rq=RQSettings(redis_url=rq_server.url),
    )


def partition_events(ns: str, partition: int) -> str:
    return Keys.for_partition(ns, partition).events


def masters(settings: Settings) -> list[redis.Redis]:
    """The client of each partition's master (partition p at index p)."""
    return [partition_client(settings, p) for p in range(PARTITIONS)]


def groups(settings: Settings) -> list[object]:
    """Each partition's stream length and groups (for failure messages)."""
    out: list[object] = []
    for p, master in enumerate(masters(settings)):
        stream = partition_events(settings.namespace, p)
        found = master.xinfo_groups(stream) if master.exists(stream) else []
        out.append((master.xlen(stream), found))
    return out


def queued(rq: redis.Redis, ns: str) -> int:
    """Events in the queued jobs (a pack job carries several)."""
    return queued_events(rq, ns)


def test_events_spread_over_the_masters_and_each_fans_out_once(
    cluster: LocalCluster, rq_server: LocalServer
) -> None:
    settings = cluster_settings(cluster, rq_server, "ce")
    ns = settings.namespace
    homes = {node_url(cluster.url, partition_events(ns, p)) for p in range(PARTITIONS)}
    assert len(homes) == PARTITIONS  # one partition per master
    rq = connect(rq_server.url)
    recorder = Recorder(settings)
    sessions = sessions_covering(PARTITIONS, per_partition=2, prefix="c")
    sent: list[Event] = []

    def batch(n: int) -> list[Event]:
        made = [
            Event(kind="PostToolUse", session_id=s, payload={"i": len(sent) + i})
            for i in range(n)
            for s in sessions
        ]
        sent.extend(made)
        return made

    dispatchers = start_dispatchers(settings, recorder, 2)
    try:
        with HookBus(settings) as bus:
            bus.publish_many(batch(3))
            for event in batch(1):
                bus.publish(event)

        async def publish_async() -> None:
            async with AsyncHookBus(settings) as abus:
                await abus.publish_many(batch(2))
                for event in batch(1):
                    await abus.publish(event)

        asyncio.run(publish_async())
        assert min(lengths(masters(settings), ns)) > 0  # the SDK clients spread them
        eventlog.publish_many(bus_client(settings), settings, batch(2))
        for event in batch(1):  # `hookbus publish`, on the partition's master
            send_event(settings, prepare_event(settings, event), event.session_id)
        wait_for(
            lambda: queued(rq, ns) == len(sent),
            30,
            "one job per event",
            lambda: (queued(rq, ns), len(sent), groups(settings)),
        )
    finally:
        stop_dispatchers(dispatchers)
    expected = Counter(partition_of(e.session_id, PARTITIONS) for e in sent)
    assert lengths(masters(settings), ns) == [expected[p] for p in range(PARTITIONS)]
    assert min(expected.values()) > 0
    for p, master in enumerate(masters(settings)):
        assert master.xpending(partition_events(ns, p), FANOUT_GROUP)["pending"] == 0
    run_jobs(settings, rq, recorder)
    ran = Counter(event_id for event_id, _, _ in recorder.runs)
    assert ran == Counter({e.id: 1 for e in sent})


def test_status_shows_every_partition_s_lag_and_one_session_s_events_run_in_order(
    cluster: LocalCluster, rq_server: LocalServer
) -> None:
    settings = cluster_settings(cluster, rq_server, "co")
    ns = settings.namespace
    rq = connect(rq_server.url)
    for p, master in enumerate(masters(settings)):  # the groups, before any event
        master.xgroup_create(partition_events(ns, p), FANOUT_GROUP, id="0", mkstream=True)
    sessions = sessions_covering(PARTITIONS, per_partition=2, prefix="o")
    with HookBus(settings) as bus:
        for i in range(10):
            bus.publish_many(
                [Event(kind="PostToolUse", session_id=s, payload={"i": i}) for s in sessions]
            )
    env = {
        "HOOKBUS_REDIS_URL": cluster.url,
        "HOOKBUS_NAMESPACE": ns,
        "HOOKBUS_PARTITIONS": str(PARTITIONS),
        "HOOKBUS_RQ__REDIS_URL": rq_server.url,
    }

    def status() -> dict[str, dict[str, object]]:
        out = CliRunner().invoke(status_app, ["status", "--json"], env=env, catch_exceptions=False)
        assert out.exit_code == 69, out.output  # no chain worker here: exit 69, report all the same
        return {s["name"]: s for s in json.loads(out.stdout)["streams"]}

    before = status()
    for p in range(PARTITIONS):
        events = before["events" if p == 0 else f"events p{p}"]
        assert (events["partition"], events["length"]) == (p, 20)  # 2 sessions x 10 events
        assert [(g["name"], g["pending"], g["lag"]) for g in events["groups"]] == [  # type: ignore[attr-defined]
            (FANOUT_GROUP, 0, 20)
        ]
    recorder = Recorder(settings)
    dispatchers = start_dispatchers(settings, recorder, 1)
    try:
        wait_for(lambda: queued(rq, ns) == 10 * len(sessions), 30, "every job queued")
    finally:
        stop_dispatchers(dispatchers)
    after = status()
    for p in range(PARTITIONS):
        events = after["events" if p == 0 else f"events p{p}"]
        assert [(g["pending"], g["lag"]) for g in events["groups"]] == [(0, 0)]  # type: ignore[attr-defined]
    run_jobs(settings, rq, recorder)
    for session in sessions:
        assert [i for _, s, i in recorder.runs if s == session] == list(range(10)), session


def test_a_dispatcher_killed_holding_every_partition_on_a_cluster_loses_and_doubles_nothing(
    cluster: LocalCluster, rq_server: LocalServer, tmp_path: Path
) -> None:
    settings = cluster_settings(cluster, rq_server, "ck")
    ns = settings.namespace
    hooks = tmp_path / "hooks"
    write_order_hook(hooks)
    record_key = f"record:{ns}"
    env = worker_env(cluster.url, ns, record_key)
    env.update(
        HOOKBUS_PARTITIONS=str(PARTITIONS),
        HOOKBUS_RQ__REDIS_URL=rq_server.url,
        FANOUT_RECORD_URL=rq_server.url,
    )
    rq = connect(rq_server.url)
    sessions = sessions_covering(PARTITIONS, per_partition=2, prefix="k")
    sent = [
        Event(kind="PostToolUse", session_id=s, payload={"i": i})
        for i in range(10)
        for s in sessions
    ]
    with HookBus(settings) as bus:
        bus.publish_many(sent)

    def pending() -> list[int]:
        return [
            int(m.xpending(partition_events(ns, p), FANOUT_GROUP)["pending"])
            for p, m in enumerate(masters(settings))
        ]

    with processes() as procs:
        dying = spawn_python(DYING_DISPATCHER.format(hooks=str(hooks), partitions=PARTITIONS), env)
        procs.append(dying)
        dying.wait(60)
        assert dying.returncode == -9
        held = pending()
        assert held == lengths(masters(settings), ns) and min(held) > 0, held
        assert queued(rq, ns) == len(sent)
        procs.append(spawn_python(RESTARTED_DISPATCHER.format(hooks=str(hooks)), env))
        procs.append(spawn_worker("rq", hooks, env, "--isolation", "none"))
        wait_for(lambda: pending() == [0] * PARTITIONS, 30, "every partition reclaimed", pending)
        wait_for(lambda: len(counts(rq, record_key)) == len(sent), 60, "every event's hook run")
        wait_for(lambda: queued(rq, ns) == 0, 10, "an empty queue")
    assert counts(rq, record_key) == {e.id: 1 for e in sent}
    for session in sessions:
        assert order_of(rq, record_key, session) == list(range(10)), session
