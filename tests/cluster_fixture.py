"""Private Redis servers for tests and benchmarks: one plain server, or a local Cluster.

Counting commands (``INFO commandstats``) and Redis CPU needs a server nobody else uses
(the shared one on 6379 serves every other test running at the same time), and the Cluster
tests need a cluster. Both start ``redis-server`` on free loopback ports in a temporary
folder, with nothing on disk (``--save '' --appendonly no``), and are torn down afterwards.
A cluster of ``masters`` servers (and ``replicas`` replicas of each, for failover tests) is
joined by ``redis-cli --cluster create ... --cluster-replicas R --cluster-yes`` and waited on
until every slot is served and every replica is in sync.

Benchmarks import this module too (``benchmarks/fleet.py``), so it imports no pytest at
module level; the fixtures at the bottom do.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import redis

#: How long a started server gets to answer PING, in seconds.
START_TIMEOUT_S = 10.0
#: How long a created cluster gets to report every slot served, in seconds.
CLUSTER_READY_TIMEOUT_S = 20.0


def binary(name: str) -> str:
    """The path of ``redis-server`` / ``redis-cli``; a clear failure when it is missing."""
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"{name} is not installed: the private-server tests need it on PATH")
    return found


def free_port() -> int:
    """A loopback TCP port nothing listens on now (and its cluster bus port +10000 too)."""
    for _ in range(100):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port + 10000 > 65535:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port pair found")


class LocalServer:
    """One redis-server process on a free port, nothing on disk."""

    def __init__(
        self, folder: Path, *, cluster: bool = False, extra_args: tuple[str, ...] = ()
    ) -> None:
        self.folder = folder
        self.port = free_port()
        self.cluster = cluster
        self.extra_args = extra_args
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        args = [
            binary("redis-server"),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.folder),
            "--save", "",
            "--appendonly", "no",
            "--logfile", str(self.folder / "redis.log"),
        ]  # fmt: skip
        args += list(self.extra_args)
        if self.cluster:
            args += [
                "--cluster-enabled", "yes",
                "--cluster-config-file", str(self.folder / "nodes.conf"),
                "--cluster-node-timeout", "2000",
            ]  # fmt: skip
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        client = redis.Redis(port=self.port, socket_timeout=1, protocol=2)
        deadline = time.monotonic() + START_TIMEOUT_S
        try:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"redis-server exited; see {self.folder / 'redis.log'}")
                with contextlib.suppress(redis.exceptions.RedisError, OSError):
                    if client.ping():
                        return
                time.sleep(0.02)
        finally:
            client.close()
        raise RuntimeError(f"redis-server on port {self.port} did not answer PING in time")

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, protocol=2)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


class LocalCluster:
    """``masters`` cluster-enabled servers joined into one Redis Cluster, each with
    ``replicas`` replicas (the first ``masters`` nodes start as the masters)."""

    def __init__(self, folder: Path, masters: int = 3, replicas: int = 0) -> None:
        if masters < 3:
            raise ValueError("redis-cli --cluster create needs at least 3 masters")
        count = masters * (1 + replicas)
        self.replicas = replicas
        self.nodes = [LocalServer(folder / f"node{i}", cluster=True) for i in range(count)]
        self.url = f"redis+cluster://127.0.0.1:{self.nodes[0].port}"

    def start(self) -> None:
        try:
            for node in self.nodes:
                node.start()
            addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
            subprocess.run(
                [
                    *(binary("redis-cli"), "--cluster", "create", *addresses),
                    *("--cluster-replicas", str(self.replicas), "--cluster-yes"),
                ],
                check=True,
                capture_output=True,
                timeout=60,
            )
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + CLUSTER_READY_TIMEOUT_S
        while time.monotonic() < deadline:
            live = [node for node in self.nodes if node.proc is not None]
            if all(_cluster_ok(node) and _replica_synced(node) for node in live):
                return
            time.sleep(0.05)
        raise RuntimeError("the local cluster did not report cluster_state:ok in time")

    def node_of(self, port: int) -> LocalServer:
        return next(node for node in self.nodes if node.port == port)

    def master_port(self, slot_key: str) -> int:
        """The port of the master serving ``slot_key``, as a live node reports it."""
        from redis.crc import key_slot

        slot = int(key_slot(slot_key.encode()))
        for node in self.nodes:
            if node.proc is None:
                continue
            client = node.client()
            try:
                ranges: Any = client.execute_command("CLUSTER", "SLOTS")
            except (redis.exceptions.RedisError, OSError):
                continue
            finally:
                client.close()
            for start, end, *rest in _slot_rows(ranges):
                if start <= slot <= end:
                    return int(rest[0][1])
        raise RuntimeError(f"no live node knows who serves slot {slot}")

    def kill(self, port: int) -> None:
        """SIGKILL one node (a crashed master, say)."""
        node = self.node_of(port)
        proc, node.proc = node.proc, None
        if proc is not None:
            proc.kill()
            proc.wait(5)

    def wait_promoted(self, slot_key: str, old_port: int, timeout_s: float = 30.0) -> float:
        """Wait until another node serves ``slot_key``'s slot; returns time.monotonic()
        when it was first seen promoted."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            with contextlib.suppress(RuntimeError):
                if self.master_port(slot_key) != old_port:
                    return time.monotonic()
            time.sleep(0.02)
        raise RuntimeError(f"no replica of {old_port} was promoted within {timeout_s} s")

    def node_clients(self) -> list[redis.Redis]:
        return [node.client() for node in self.nodes]

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def _slot_rows(reply: Any) -> list[list[Any]]:
    """CLUSTER SLOTS as rows ``[start, end, [host, port, ...], ...]`` (raw or parsed)."""
    if isinstance(reply, dict):
        return [[start, end, list(info["primary"])] for (start, end), info in reply.items()]
    return [list(row) for row in reply]


def _replica_synced(node: LocalServer) -> bool:
    """False for a replica whose link to its master is not up yet."""
    client = node.client()
    try:
        info = client.info("replication")
    except (redis.exceptions.RedisError, OSError):
        return False
    finally:
        client.close()
    return info.get("role") != "slave" or info.get("master_link_status") == "up"


def _cluster_ok(node: LocalServer) -> bool:
    client = node.client()
    try:
        info: Any = client.execute_command("CLUSTER", "INFO")
    except (redis.exceptions.RedisError, OSError):
        return False
    finally:
        client.close()
    text = info.decode() if isinstance(info, bytes) else str(info)
    return "cluster_state:ok" in text and "cluster_slots_ok:16384" in text


@contextlib.contextmanager
def local_server(*extra_args: str) -> Iterator[LocalServer]:
    """A private plain server for the duration of the block (``extra_args`` added to its
    command line)."""
    with tempfile.TemporaryDirectory(prefix="hookbus-redis-") as tmp:
        server = LocalServer(Path(tmp), extra_args=extra_args)
        server.start()
        try:
            yield server
        finally:
            server.stop()


@contextlib.contextmanager
def local_cluster(masters: int = 3, replicas: int = 0) -> Iterator[LocalCluster]:
    """A private local cluster of ``masters`` masters (each with ``replicas`` replicas)
    for the duration of the block."""
    with tempfile.TemporaryDirectory(prefix="hookbus-cluster-") as tmp:
        cluster = LocalCluster(Path(tmp), masters, replicas)
        cluster.start()
        try:
            yield cluster
        finally:
            cluster.stop()


def commandstats(client: redis.Redis) -> dict[str, int]:
    """``INFO commandstats`` as {command: calls} (commands run inside scripts included)."""
    raw = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(stats["calls"]) for name, stats in raw.items()}


def cpu_seconds(client: redis.Redis) -> float:
    """The server's CPU so far, user + system, in seconds."""
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """Calls per command between two :func:`commandstats` snapshots (zero rows left out)."""
    out = {name: calls - before.get(name, 0) for name, calls in after.items()}
    return {name: calls for name, calls in out.items() if calls}


def namespace_on(cluster_url: str, master_url: str, prefix: str = "c") -> str:
    """A fresh namespace whose own slot ``{ns}`` the master at ``master_url`` serves."""
    import uuid

    from hookbus.bus.connection import node_url
    from hookbus.bus.keys import workers

    for _ in range(1000):
        ns = f"{prefix}{uuid.uuid4().hex[:8]}"
        if node_url(cluster_url, workers(ns)) == master_url:
            return ns
    raise RuntimeError(f"no namespace found on {master_url}")


def namespace_spread(cluster_url: str, partitions: int, prefix: str = "p") -> str:
    """A fresh namespace whose first ``partitions`` partitions sit on as many masters as
    there are (or on ``partitions`` different ones, when fewer)."""
    import uuid

    from hookbus.bus.connection import master_urls, node_url
    from hookbus.bus.keys import Keys

    want = min(partitions, len(master_urls(cluster_url)))
    for _ in range(1000):
        ns = f"{prefix}{uuid.uuid4().hex[:8]}"
        homes = {
            node_url(cluster_url, Keys.for_partition(ns, p).requests) for p in range(partitions)
        }
        if len(homes) == want:
            return ns
    raise RuntimeError("no namespace found whose partitions spread over the masters")
