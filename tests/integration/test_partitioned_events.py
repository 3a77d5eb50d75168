"""Partitioned event streams on one real server, ``partitions = 4`` (issue 16 point 2).

Every producer (the sync and asyncio SDK clients, ``eventlog``, the lean ``hookbus
publish`` and the agent-CLI hook's publish) appends an event to the stream of its
session's partition; the fan-out dispatchers read every partition, each in its own group
``fanout``; every event runs its hook exactly once, one session's events in the order
they were published; ``hookbus status`` shows the lag and pending of every partition.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from typer.testing import CliRunner

from hookbus import AsyncHookBus, HookBus
from hookbus.bus import eventlog, keys
from hookbus.bus.keys import CHAIN_GROUP, FANOUT_GROUP, Keys, partition_of
from hookbus.bus.resp import RespConnection
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event, to_builtins
from hookbus.cli.fleet import status as status_cli
from hookbus.cli.lean import prepare_event, send_event
from hookbus.harnesses.lean import hook as harness_hook
from hookbus.harnesses.lean.config import LeanConfig
from hookbus.workers.fleet.heartbeat import list_workers
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
    PARTITIONS,
    RESTARTED_DISPATCHER,
    Recorder,
    counts,
    delete_partitions,
    lengths,
    order_of,
    run_jobs,
    sessions_covering,
    start_dispatchers,
    status_app,
    stop_dispatchers,
    write_order_hook,
)


@pytest.fixture
def settings(real_redis: redis.Redis, real_redis_url: str, namespace: str) -> Iterator[Settings]:
    yield Settings(redis_url=real_redis_url, namespace=namespace, partitions=PARTITIONS)
    delete_partitions(real_redis, namespace)


def queued(client: redis.Redis, ns: str) -> int:
    """Events in the queued jobs (a pack job carries several)."""
    return queued_events(client, ns)


def partition_clients(client: redis.Redis) -> list[redis.Redis]:
    return [client] * PARTITIONS


def test_events_of_many_sessions_spread_over_the_partitions_and_each_fans_out_once(
    real_redis: redis.Redis, settings: Settings
) -> None:
    ns = settings.namespace
    recorder = Recorder(settings)
    sessions = sessions_covering(PARTITIONS, per_partition=2)
    dispatchers = start_dispatchers(settings, recorder, 2)  # two consumers per partition
    try:
        wait_for(
            lambda: len(list_workers(real_redis, Keys.for_namespace(ns))) == 2,
            20,
            "two fan-out dispatchers",
        )
        sent: list[Event] = []

        def batch(tag: str, n: int) -> list[Event]:
            made = [
                Event(kind="PostToolUse", session_id=s, payload={"i": len(sent) + i, "by": tag})
                for i in range(n)
                for s in sessions
            ]
            sent.extend(made)
            return made

        with HookBus(settings) as bus:  # the sync SDK client
            bus.publish_many(batch("sync", 3))
            for event in batch("sync-one", 1):
                bus.publish(event)

        async def publish_async() -> None:
            async with AsyncHookBus(settings) as abus:
                await abus.publish_many(batch("async", 2))
                for event in batch("async-one", 1):
                    await abus.publish(event)

        asyncio.run(publish_async())
        assert min(lengths(partition_clients(real_redis), ns)) > 0  # the SDK clients spread them
        eventlog.publish_many(real_redis, settings, batch("eventlog", 2))
        for event in batch("lean", 1):  # the lean `hookbus publish` path
            send_event(settings, prepare_event(settings, event), event.session_id)
        cfg = LeanConfig(redis_url=settings.effective_redis_url, namespace=ns, partitions=4)
        with RespConnection(cfg.redis_url) as conn:  # the agent-CLI hook's publish
            for event in batch("agent-cli", 1):
                harness_hook.publish(conn, cfg, to_builtins(event))
        wait_for(lambda: queued(real_redis, ns) == len(sent), 30, "one job per event")
    finally:
        stop_dispatchers(dispatchers)
    per_partition = lengths(partition_clients(real_redis), ns)
    expected = Counter(partition_of(e.session_id, PARTITIONS) for e in sent)
    assert per_partition == [expected[p] for p in range(PARTITIONS)]
    assert min(per_partition) > 0, per_partition  # every partition got events
    for p in range(PARTITIONS):
        assert real_redis.xpending(Keys.for_partition(ns, p).events, FANOUT_GROUP)["pending"] == 0
    run_jobs(settings, real_redis, recorder)
    ran = Counter(event_id for event_id, _, _ in recorder.runs)
    assert ran == Counter({e.id: 1 for e in sent})  # every event once, none twice


def test_one_session_s_events_run_in_the_order_they_were_published(
    real_redis: redis.Redis, settings: Settings
) -> None:
    ns = settings.namespace
    recorder = Recorder(settings)
    sessions = sessions_covering(PARTITIONS, per_partition=2, prefix="order")
    with HookBus(settings) as bus:
        for i in range(15):  # interleaved: each session's i-th event, then the next i
            bus.publish_many(
                [Event(kind="PostToolUse", session_id=s, payload={"i": i}) for s in sessions]
            )
    assert min(lengths(partition_clients(real_redis), ns)) > 0
    dispatchers = start_dispatchers(settings, recorder, 1)
    try:
        wait_for(lambda: queued(real_redis, ns) == 15 * len(sessions), 30, "every job queued")
    finally:
        stop_dispatchers(dispatchers)
    run_jobs(settings, real_redis, recorder)
    for session in sessions:
        order = [i for _, s, i in recorder.runs if s == session]
        assert order == list(range(15)), (session, order)


status_app.command("status")(status_cli.status)
status_app.command("version", hidden=True)(lambda: None)  # two commands: "status" is parsed


def test_status_lists_the_lag_and_pending_of_every_partition(
    real_redis: redis.Redis, real_redis_url: str, settings: Settings
) -> None:
    ns = settings.namespace
    sessions = sessions_covering(PARTITIONS, per_partition=1, prefix="lag")
    for p in range(PARTITIONS):
        part = Keys.for_partition(ns, p)
        real_redis.xgroup_create(part.events, FANOUT_GROUP, id="0", mkstream=True)
        real_redis.xgroup_create(part.requests, CHAIN_GROUP, id="0", mkstream=True)
        for i in range(p + 1):  # p + 1 requests waiting in partition p
            real_redis.xadd(part.requests, {"r": str(i)})
    with HookBus(settings) as bus:
        for n, session in enumerate(sessions):  # 2 * (n + 1) events in the session's partition
            bus.publish_many(
                [
                    Event(kind="PostToolUse", session_id=session, payload={"i": i})
                    for i in range(2 * (n + 1))
                ]
            )
    # one event of each partition read and not yet acknowledged: pending 1, lag one less
    for p in range(PARTITIONS):
        real_redis.xreadgroup(FANOUT_GROUP, "c1", {Keys.for_partition(ns, p).events: ">"}, count=1)
    env = {
        "HOOKBUS_REDIS_URL": real_redis_url,
        "HOOKBUS_NAMESPACE": ns,
        "HOOKBUS_PARTITIONS": str(PARTITIONS),
    }
    out = CliRunner().invoke(status_app, ["status", "--json"], env=env, catch_exceptions=False)
    assert out.exit_code == 69, out.output  # no chain worker here; the report comes all the same
    streams = {s["name"]: s for s in json.loads(out.stdout)["streams"]}
    for p in range(PARTITIONS):
        suffix = "" if p == 0 else f" p{p}"
        requests = streams[f"requests{suffix}"]
        assert (requests["partition"], requests["key"]) == (p, Keys.for_partition(ns, p).requests)
        assert [(g["name"], g["pending"], g["lag"]) for g in requests["groups"]] == [
            (CHAIN_GROUP, 0, p + 1)
        ]
        session = next(s for s in sessions if partition_of(s, PARTITIONS) == p)
        published = 2 * (sessions.index(session) + 1)
        events = streams[f"events{suffix}"]
        assert (events["partition"], events["length"]) == (p, published)
        assert [(g["name"], g["pending"], g["lag"]) for g in events["groups"]] == [
            (FANOUT_GROUP, 1, published - 1)
        ]
    for p in range(1, PARTITIONS):  # a partition's decision log and dead letters too
        assert streams[f"decisions p{p}"]["key"] == Keys.for_partition(ns, p).decisions
        assert streams[f"dead letters p{p}"]["key"] == Keys.for_partition(ns, p).dead_letters
    table = CliRunner().invoke(status_app, ["status"], env=env, catch_exceptions=False)
    assert table.exit_code == 69, table.output
    assert all(f"events p{p}" in table.stdout for p in range(1, PARTITIONS))


HOOKBUS = str(Path(sys.executable).with_name("hookbus"))


def test_tail_shows_and_follows_the_events_of_every_partition(
    real_redis: redis.Redis, real_redis_url: str, settings: Settings, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env.update(
        HOOKBUS_REDIS_URL=real_redis_url,
        HOOKBUS_NAMESPACE=settings.namespace,
        HOOKBUS_PARTITIONS=str(PARTITIONS),
        XDG_RUNTIME_DIR=str(tmp_path),  # no running `hookbus dev` elsewhere applies
    )
    sessions = sessions_covering(PARTITIONS, per_partition=1, prefix="tail")

    def publish(events: list[Event]) -> None:
        """Straight into each session's partition stream (this test is about reading)."""
        for event in events:
            stream = Keys.for_partition(
                settings.namespace, partition_of(event.session_id, PARTITIONS)
            )
            real_redis.xadd(stream.events, {"e": eventlog.prepare(settings, event)})

    sent = [Event(kind="PostToolUse", session_id=s, payload={"i": 0}) for s in sessions]
    publish(sent)
    last = subprocess.run(
        [HOOKBUS, "tail", "--last", "4", "--count", "4", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=20,  # a tail of partition 0 alone would wait here for the other three
    )
    assert last.returncode == 0, last.stderr
    shown = [json.loads(line) for line in last.stdout.splitlines()]
    assert sorted(e["id"] for e in shown) == sorted(e.id for e in sent)
    assert [e["entry_id"] for e in shown] == sorted(
        (e["entry_id"] for e in shown), key=lambda i: tuple(map(int, i.split("-")))
    )
    follow = subprocess.Popen(
        [HOOKBUS, "tail", "--count", "8", "--json"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 30
        round_ = 1
        while follow.poll() is None and time.monotonic() < deadline:
            publish(
                [Event(kind="PostToolUse", session_id=s, payload={"i": round_}) for s in sessions]
            )
            round_ += 1
            time.sleep(0.2)
        out, _ = follow.communicate(timeout=10)
    finally:
        if follow.poll() is None:
            follow.send_signal(signal.SIGINT)
            follow.communicate(timeout=10)
    assert follow.returncode == 0
    followed = [json.loads(line) for line in out.splitlines()]
    assert len(followed) == 8
    assert {partition_of(e["session"], PARTITIONS) for e in followed} == set(range(PARTITIONS))


def test_a_dispatcher_killed_holding_every_partition_s_entries_loses_and_doubles_nothing(
    real_redis: redis.Redis, real_redis_url: str, settings: Settings, tmp_path: Path
) -> None:
    ns = settings.namespace
    hooks = tmp_path / "hooks"
    write_order_hook(hooks)
    record_key = keys.namespace_pattern(ns).rstrip("*") + "test-record"
    env = dict(worker_env(real_redis_url, ns, record_key), HOOKBUS_PARTITIONS=str(PARTITIONS))
    sessions = sessions_covering(PARTITIONS, per_partition=2, prefix="kill")
    sent = [
        Event(kind="PostToolUse", session_id=s, payload={"i": i})
        for i in range(10)
        for s in sessions
    ]
    with HookBus(settings) as bus:
        bus.publish_many(sent)

    def pending() -> list[int]:
        return [
            int(real_redis.xpending(Keys.for_partition(ns, p).events, FANOUT_GROUP)["pending"])
            for p in range(PARTITIONS)
        ]

    with processes() as procs:
        dying = spawn_python(DYING_DISPATCHER.format(hooks=str(hooks), partitions=PARTITIONS), env)
        procs.append(dying)
        dying.wait(60)
        assert dying.returncode == -9
        held = pending()
        assert held == lengths(partition_clients(real_redis), ns)  # all read, none acked
        assert min(held) > 0, held
        assert queued(real_redis, ns) == len(sent)  # enqueued before it died
        procs.append(spawn_python(RESTARTED_DISPATCHER.format(hooks=str(hooks)), env))
        procs.append(spawn_worker("rq", hooks, env, "--isolation", "none"))
        wait_for(lambda: pending() == [0] * PARTITIONS, 30, "every partition reclaimed", pending)
        wait_for(
            lambda: len(counts(real_redis, record_key)) == len(sent),
            60,
            "every event's hook run",
            lambda: (len(counts(real_redis, record_key)), queued(real_redis, ns)),
        )
        wait_for(lambda: queued(real_redis, ns) == 0, 10, "an empty queue")
    assert counts(real_redis, record_key) == {e.id: 1 for e in sent}  # none lost, none twice
    for session in sessions:
        assert order_of(real_redis, record_key, session) == list(range(10)), session
