"""A bounded number of readers per partition on real processes: blocked readers stay at
partitions x 2 whatever the fleet's size, and workers joining and leaving mid-run (SIGTERM
and SIGKILL) on a 3-master cluster with 6 partitions leave no request unanswered, none
answered twice, and no partition unread for longer than a reader lease."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from hookbus import HookBus
from hookbus.bus import decision_batch
from hookbus.bus.connection import partition_client
from hookbus.bus.keys import Keys
from hookbus.bus.wire import Decision
from tests.cluster_fixture import LocalCluster, local_cluster, local_server
from tests.state_helpers import fleet, tool_call, write_hook

GUARD = """
events = ["PreToolUse"]
[match]
tools = ["Bash"]
[action.prompt_inject]
content = "guarded"
"""


def _blocked_readers(client: redis.Redis) -> int:
    """Clients blocked in XREADGROUP on this server now."""
    return sum(
        1
        for c in client.client_list()
        if c.get("cmd") == "xreadgroup" and "b" in str(c.get("flags", ""))
    )


@pytest.mark.parametrize(("readers", "expected"), [(2, 8), (0, 20)])
def test_five_processes_on_four_partitions_keep_two_blocked_readers_per_partition(
    tmp_path: Path, readers: int, expected: int
) -> None:
    write_hook(tmp_path, "guard", GUARD)
    namespace = f"r{uuid.uuid4().hex[:8]}"
    with (
        local_server() as server,
        fleet(
            server.url,
            namespace,
            tmp_path,
            HOOKBUS_PARTITIONS="4",
            HOOKBUS_WORKERS__READERS_PER_PARTITION=str(readers),
        ) as workers,
    ):
        for _ in range(5):
            workers.start("chain")
        workers.wait_chain_workers(5)
        client = server.client()
        end = time.monotonic() + 15
        while _blocked_readers(client) != expected and time.monotonic() < end:
            time.sleep(0.1)
        assert _blocked_readers(client) == expected
        with HookBus.from_url(server.url, namespace=namespace) as bus:
            answers = [bus.request(tool_call(f"s{i}"), deadline_ms=5_000) for i in range(40)]
        assert not any(d.degraded for d in answers)


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with local_cluster(3) as started:
        yield started


def test_workers_joining_and_leaving_on_a_cluster_with_six_partitions_lose_and_double_nothing(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    write_hook(tmp_path, "guard", GUARD)
    namespace = f"c{uuid.uuid4().hex[:8]}"
    answers: list[tuple[float, Decision]] = []
    stop = threading.Event()
    with fleet(cluster.url, namespace, tmp_path, HOOKBUS_PARTITIONS="6") as workers:
        first = workers.start("chain")
        second = workers.start("chain")
        third = workers.start("chain")
        workers.wait_chain_workers(3)

        def load(offset: int) -> None:
            with HookBus.from_url(cluster.url, namespace=namespace) as bus:
                i = 0
                while not stop.is_set():
                    started = time.monotonic()
                    decision = bus.request(tool_call(f"s{offset}-{i}"), deadline_ms=6_000)
                    answers.append((time.monotonic() - started, decision))
                    i += 1

        threads = [threading.Thread(target=load, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        try:
            time.sleep(2)
            workers.start("chain")  # one joins
            time.sleep(3)
            first.send_signal(signal.SIGTERM)  # one leaves
            time.sleep(3)
            os.kill(second.pid, signal.SIGKILL)  # one dies
            time.sleep(6)  # past the dead one's reader leases
            workers.start("chain")  # and another joins
            time.sleep(3)
        finally:
            stop.set()
            for thread in threads:
                thread.join(30)
        assert third.poll() is None
        settings = workers.settings()
        logged: Counter[str] = Counter()
        end = time.monotonic() + 10
        while time.monotonic() < end:  # the ledgers flush within 0.1 s of an answer
            logged = Counter(
                record[b"id"].decode()
                for p in range(6)
                for record in decision_batch.logged(
                    partition_client(settings, p), Keys.for_partition(namespace, p).decisions
                )
            )
            if sum(logged.values()) >= len(answers):
                break
            time.sleep(0.2)
    assert len(answers) > 100
    degraded = [d for _, d in answers if d.degraded]
    assert not degraded, degraded[:3]
    # no partition went unread longer than a reader lease (3 s) plus a rebalancing round
    assert max(t for t, _ in answers) < 4.5, sorted(t for t, _ in answers)[-5:]
    ids = [d.request_id for _, d in answers]
    assert len(set(ids)) == len(ids)
    assert all(logged[i] == 1 for i in ids if i in logged), [i for i in ids if logged[i] > 1]
    for node in cluster.node_clients():
        for key in node.scan_iter(match=f"*{namespace}*", count=1000):
            node.delete(key)


def test_only_a_partitions_readers_check_its_stream_health(tmp_path: Path) -> None:
    """The stream warden (XINFO STREAM + XINFO GROUPS four times a second) runs for the
    partitions a process reads, not for every partition in every process: idle commands
    grow with the readers, not with the fleet."""
    write_hook(tmp_path, "guard", GUARD)
    namespace = f"r{uuid.uuid4().hex[:8]}"
    with (
        local_server() as server,
        fleet(
            server.url,
            namespace,
            tmp_path,
            HOOKBUS_PARTITIONS="2",
            HOOKBUS_WORKERS__READERS_PER_PARTITION="1",
        ) as workers,
    ):
        for _ in range(4):
            workers.start("chain")
        workers.wait_chain_workers(4)
        client = server.client()
        end = time.monotonic() + 15
        while _blocked_readers(client) != 2 and time.monotonic() < end:
            time.sleep(0.1)
        before = client.info("commandstats").get("cmdstat_xinfo|stream", {}).get("calls", 0)
        time.sleep(3.0)
        after = client.info("commandstats").get("cmdstat_xinfo|stream", {}).get("calls", 0)
    # two readers, four checks a second each: about 24 in 3 s (every process checking
    # every partition was about 96)
    assert 6 <= after - before <= 40, after - before
