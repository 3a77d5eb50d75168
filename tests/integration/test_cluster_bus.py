"""The blocking path on a 3-master local Redis Cluster (issue 16 points 2 and 5).

Every key of a namespace partition shares one hash slot, so a chain worker and the clients
talk to the master that serves it through plain connections: scripts, raw hand-packed
commands and blocking reads work there as on one server. Namespaces spread over the
masters. Workers run as subprocesses on a cluster URL (``redis+cluster://``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from hookbus import AsyncHookBus, HookBus
from hookbus.bus.connection import (
    bus_client,
    connect,
    master_urls,
    node_url,
    partition_client,
)
from hookbus.bus.decision_batch import logged
from hookbus.bus.keys import Keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Decision, Event
from hookbus.errors import ConfigError
from hookbus.workers.fleet.heartbeat import alive_workers, list_workers
from tests.cluster_fixture import LocalCluster, local_cluster, namespace_on, namespace_spread

ROOT = Path(__file__).resolve().parents[2]

WORKER_CODE = r"""
import sys, threading, time
from hookbus.bus.wire import HookResult
from hookbus.bus.settings.loader import load_settings
from hookbus.hooks.registry import HookRegistry
from hookbus.workers.chain.worker import run_chain_worker
from hookbus.workers.fleet.signals import graceful_signals

url, ns, partitions = sys.argv[1], sys.argv[2], int(sys.argv[3])
settings = load_settings(
    overrides={"redis_url": url, "namespace": ns, "partitions": partitions}
).settings
registry = HookRegistry.from_settings(settings)

def guard(event):
    if event.payload.get("act") == "deny":
        return HookResult(outcome="deny", reason="guard says no")
    if event.payload.get("act") == "sleep":
        time.sleep(float(event.payload["sleep_s"]))
    return None

registry.register("guard", guard, events=["PreToolUse"], priority=10)
stop = threading.Event()
with graceful_signals(stop):
    run_chain_worker(settings, registry=registry, stop_event=stop, supervise=False)
"""


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with local_cluster(3) as started:
        yield started


def start_worker(url: str, ns: str, partitions: int = 1) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-c", WORKER_CODE, url, ns, str(partitions)], env=env, cwd=ROOT
    )


def wait_alive(settings: Settings, n: int) -> None:
    client = bus_client(settings)
    keys = Keys.for_namespace(settings.namespace)
    end = time.monotonic() + 30
    while len(alive_workers(client, keys, dead_after_ms=5_000, role="chain")) < n:
        assert time.monotonic() < end, "chain workers did not start on the cluster"
        time.sleep(0.05)


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def holding_requests(
    settings: Settings, procs: list[subprocess.Popen[bytes]]
) -> subprocess.Popen[bytes]:
    """The worker process that holds unanswered requests now, in any partition (waits
    until one does)."""
    own = bus_client(settings)
    end = time.monotonic() + 10
    while time.monotonic() < end:
        holders: set[str] = set()
        for partition in range(settings.partitions):
            keys = Keys.for_partition(settings.namespace, partition)
            pending = partition_client(settings, partition).xpending(keys.requests, "chain")
            holders |= {c["name"].decode() for c in pending.get("consumers") or [] if c["pending"]}
        for info in list_workers(own, Keys.for_namespace(settings.namespace)):
            for proc in procs:
                if info.id in holders and info.pid == proc.pid:
                    return proc
        time.sleep(0.01)
    raise AssertionError("no worker held requests")


def bash(command: str, session: str = "s", **payload: object) -> Event:
    return Event(
        kind="PreToolUse",
        session_id=session,
        payload={"tool_name": "Bash", "tool_input": {"command": command}, **payload},
    )


def test_requests_are_answered_on_every_master_of_a_cluster(cluster: LocalCluster) -> None:
    masters = master_urls(cluster.url)
    assert len(masters) == 3
    namespaces = [namespace_on(cluster.url, master) for master in masters]
    procs = [start_worker(cluster.url, ns) for ns in namespaces]
    try:
        for ns, master in zip(namespaces, masters, strict=True):
            settings = Settings(redis_url=cluster.url, namespace=ns)
            wait_alive(settings, 1)
            with HookBus(settings) as bus:
                allow = bus.request(bash("ls"), deadline_ms=2_000)
                deny = bus.request(bash("rm", act="deny"), deadline_ms=2_000)
            assert (allow.outcome, allow.degraded) == ("allow", False), allow.reason
            assert (deny.outcome, deny.degraded) == ("deny", False), deny.reason

            async def ask(s: Settings = settings) -> list[str]:
                async with AsyncHookBus(s) as abus:
                    got = await asyncio.gather(
                        *(abus.request(bash(f"ls {i}"), deadline_ms=2_000) for i in range(20))
                    )
                return [d.outcome for d in got if not d.degraded]

            assert asyncio.run(ask()) == ["allow"] * 20
            # the namespace's streams live on its own master, nowhere else
            here = redis.Redis.from_url(master, protocol=2)
            assert here.xlen(Keys.for_namespace(ns).requests) == 22
            here.close()
    finally:
        stop(procs)


def test_three_partitions_spread_one_namespace_s_requests_over_three_masters(
    cluster: LocalCluster,
) -> None:
    ns = namespace_spread(cluster.url, 3)
    settings = Settings(redis_url=cluster.url, namespace=ns, partitions=3)
    streams = [Keys.for_partition(ns, p).requests for p in range(3)]
    homes = {node_url(cluster.url, stream) for stream in streams}
    assert len(homes) == 3
    proc = start_worker(cluster.url, ns, partitions=3)
    try:
        wait_alive(settings, 3)  # one heartbeat per partition
        with HookBus(settings) as bus:
            sync = [bus.request(bash("ls", session=f"s{i}"), deadline_ms=3_000) for i in range(30)]

        async def ask() -> list[bool]:
            async with AsyncHookBus(settings) as abus:
                got = await asyncio.gather(
                    *(
                        abus.request(bash("ls", session=f"a{i}"), deadline_ms=3_000)
                        for i in range(60)
                    )
                )
            return [d.degraded for d in got]

        degraded = asyncio.run(ask())
    finally:
        stop([proc])
    assert [d.degraded for d in sync] == [False] * 30
    assert degraded == [False] * 60
    lengths = []
    for stream in streams:
        client = redis.Redis.from_url(node_url(cluster.url, stream), protocol=2)
        lengths.append(client.xlen(stream))
        assert client.xpending(stream, "chain")["pending"] == 0  # every entry acknowledged
        client.close()
    assert sum(lengths) == 90 and min(lengths) > 0, lengths


def test_an_rq_url_that_points_at_a_cluster_is_refused_with_what_to_do(
    cluster: LocalCluster,
) -> None:
    settings = Settings(redis_url=cluster.url, namespace="rqcheck")
    with pytest.raises(ConfigError, match=r"RQ does not support Redis Cluster.*rq\.redis_url"):
        connect(settings.effective_rq_redis_url)


@pytest.mark.parametrize("partitions", [1, 3])
def test_a_chain_worker_killed_mid_run_on_a_cluster_loses_and_doubles_nothing(
    partitions: int, cluster: LocalCluster
) -> None:
    ns = namespace_spread(cluster.url, partitions, prefix="k")
    settings = Settings(redis_url=cluster.url, namespace=ns, partitions=partitions)
    procs = [start_worker(cluster.url, ns, partitions) for _ in range(2)]
    try:
        wait_alive(settings, 2 * partitions)  # one heartbeat per partition loop

        async def run() -> list[tuple[str, bool]]:
            async with AsyncHookBus(settings) as abus:
                calls = [
                    abus.request(
                        bash(f"ls {i}", session=f"s{i}", act="sleep", sleep_s=0.05),
                        deadline_ms=8_000,
                    )
                    for i in range(60)
                ]
                tasks = [asyncio.ensure_future(call) for call in calls]
                victim = await asyncio.to_thread(holding_requests, settings, procs)
                os.kill(victim.pid, signal.SIGKILL)  # mid-run: it holds requests
                done = await asyncio.gather(*tasks)
            return [(d.request_id or "", d.degraded) for d in done]

        answers = asyncio.run(run())
    finally:
        stop(procs)
    assert [degraded for _, degraded in answers] == [False] * 60
    ids = []
    for partition in range(partitions):
        keys = Keys.for_partition(ns, partition)
        client = redis.Redis.from_url(node_url(cluster.url, keys.requests), protocol=2)
        ids += [fields[b"id"] for fields in logged(client, keys.decisions)]
        assert client.xpending(keys.requests, "chain")["pending"] == 0
        client.close()
    assert len(ids) == len(set(ids)) == 60  # one decision per request, none twice


def test_a_worker_joining_and_another_leaving_mid_run_lose_and_double_nothing(
    cluster: LocalCluster,
) -> None:
    """Every worker serves every partition (one consumer per partition group), so a worker
    that joins starts taking entries of every partition at once, and one that leaves
    (SIGTERM) finishes what it holds and settles it first: nothing to hand over."""
    partitions = 3
    ns = namespace_spread(cluster.url, partitions, prefix="j")
    settings = Settings(redis_url=cluster.url, namespace=ns, partitions=partitions)
    first = start_worker(cluster.url, ns, partitions)
    procs = [first]
    try:
        wait_alive(settings, partitions)

        async def run() -> list[tuple[str, bool, str]]:
            async with AsyncHookBus(settings) as abus:

                def wave(start: int) -> list[asyncio.Future[Decision]]:
                    return [
                        asyncio.ensure_future(
                            abus.request(
                                bash(f"ls {i}", session=f"s{i}", act="sleep", sleep_s=0.1),
                                deadline_ms=30_000,
                            )
                        )
                        for i in range(start, start + 60)
                    ]

                tasks = wave(0)  # the first worker takes these
                await asyncio.sleep(0.2)
                procs.append(start_worker(cluster.url, ns, partitions))  # joins mid-run
                await asyncio.to_thread(wait_alive, settings, 2 * partitions)
                first.terminate()  # leaves mid-run, gracefully, holding requests
                tasks += wave(60)  # only the newcomer is left to take these
                done = await asyncio.gather(*tasks)
            return [(d.request_id or "", d.degraded, d.worker or "") for d in done]

        answers = asyncio.run(run())
        assert first.wait(15) == 0
    finally:
        stop(procs)
    assert [degraded for _, degraded, _ in answers] == [False] * 120
    workers = {worker.rsplit(".p", 1)[0] for _, _, worker in answers}
    assert len(workers) == 2, workers  # both took part
    ids = []
    for partition in range(partitions):
        keys = Keys.for_partition(ns, partition)
        client = redis.Redis.from_url(node_url(cluster.url, keys.requests), protocol=2)
        ids += [fields[b"id"] for fields in logged(client, keys.decisions)]
        assert client.xpending(keys.requests, "chain")["pending"] == 0
        client.close()
    assert len(ids) == len(set(ids)) == 120  # one decision per request, none twice
