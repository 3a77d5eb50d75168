"""What a request costs Redis as the chain fleet grows: bounded readers against every worker
reading every partition, side by side in one run.

Run: ``python benchmarks/readers.py [--workers 1,50] [--partitions 4] [--requests 1000]
[--cluster]``

For each fleet size N and each mode (``bounded``: ``workers.readers_per_partition = 2``;
``unbounded``: 0, every worker reads every partition) it starts a private redis-server (or a
local 3-master cluster with ``--cluster``), N chain worker processes with the 5 python hooks of
``benchmarks/blocking.py`` over P partitions, and measures with
``benchmarks/commands_per_request.py``'s method: Redis commands and CPU per request over
sequential sync requests and over async requests (32 in flight), the idle fleet's own
commands subtracted. It prints, per row: clients blocked in XREADGROUP, connections, the idle
fleet's commands per second, commands and Redis CPU (µs) per request, and the ratio to the
1-worker row of the same mode.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from blocking import WORKER_CODE, stop_workers  # noqa: E402
from commands_per_request import OWN_COMMANDS, measure  # noqa: E402

from tests.cluster_fixture import (  # noqa: E402
    commandstats,
    delta,
    local_cluster,
    local_server,
)


def _blocked(clients: list) -> int:  # type: ignore[type-arg]
    return sum(
        1
        for client in clients
        for c in client.client_list()
        if c.get("cmd") == "xreadgroup" and "b" in str(c.get("flags", ""))
    )


def _connections(clients: list) -> int:  # type: ignore[type-arg]
    return sum(len(client.client_list()) for client in clients)


def _idle_rate(clients: list, seconds: float) -> float:  # type: ignore[type-arg]
    before = [commandstats(c) for c in clients]
    time.sleep(seconds)
    after = [commandstats(c) for c in clients]
    calls = sum(
        v
        for b, a in zip(before, after, strict=True)
        for k, v in delta(b, a).items()
        if k not in OWN_COMMANDS
    )
    return calls / seconds


def row(url: str, clients: list, workers: int, partitions: int, mode: str, requests: int) -> dict:  # type: ignore[type-arg]
    os.environ["HOOKBUS_PARTITIONS"] = str(partitions)
    os.environ["HOOKBUS_WORKERS__READERS_PER_PARTITION"] = "2" if mode == "bounded" else "0"
    ns = f"rd{uuid.uuid4().hex[:8]}"
    from hookbus.bus.connection import bus_client
    from hookbus.bus.keys import Keys
    from hookbus.bus.settings import Settings
    from hookbus.workers.fleet.heartbeat import alive_workers

    bus = bus_client(Settings(redis_url=url, namespace=ns))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = [
        subprocess.Popen([sys.executable, "-c", WORKER_CODE, url, ns], env=env)
        for _ in range(workers)
    ]
    try:
        end = time.monotonic() + 300  # each process beats once per partition it serves
        while len(alive_workers(bus, Keys.for_namespace(ns), dead_after_ms=5_000, role="chain")) < (
            workers * partitions
        ):
            if time.monotonic() > end:
                raise SystemExit(f"{workers} chain workers did not all start")
            time.sleep(0.2)
        time.sleep(2.5)  # reader slots settle (two rebalancing rounds)
        blocked = _blocked(clients)
        connections = _connections(clients)
        idle = _idle_rate(clients, 2.0)
        sync_cost, async_cost, _req, _ping = measure(
            url, _Sum(clients), ns, requests, 32, idle_s=1.0
        )
    finally:
        stop_workers(procs)
    return {
        "workers": workers,
        "mode": mode,
        "blocked": blocked,
        "connections": connections,
        "idle_cmd_s": idle,
        "sync_cmd": sync_cost.commands_per_request,
        "sync_us": sync_cost.cpu_us_per_request,
        "async_cmd": async_cost.commands_per_request if async_cost else 0.0,
        "async_us": async_cost.cpu_us_per_request if async_cost else 0.0,
    }


class _Sum:
    """Several servers read as one (``commandstats`` and ``cpu_seconds`` summed)."""

    def __init__(self, clients: list) -> None:  # type: ignore[type-arg]
        self.clients = clients

    def info(self, section: str | None = None) -> dict:  # type: ignore[type-arg]
        merged: dict = {}  # type: ignore[type-arg]
        for client in self.clients:
            for key, value in client.info(section).items():
                if isinstance(value, dict):
                    into = merged.setdefault(key, {})
                    for k, v in value.items():
                        into[k] = into.get(k, 0) + v if isinstance(v, int | float) else v
                elif isinstance(value, int | float) and not isinstance(value, bool):
                    merged[key] = merged.get(key, 0) + value
                else:
                    merged[key] = value
        return merged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,50")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--cluster", action="store_true")
    args = parser.parse_args()
    sizes = [int(n) for n in args.workers.split(",")]
    rows = []
    if args.cluster:
        with local_cluster(3) as cluster:
            clients = cluster.node_clients()
            for mode in ("bounded", "unbounded"):
                for n in sizes:
                    rows.append(row(cluster.url, clients, n, args.partitions, mode, args.requests))
    else:
        with local_server() as server:
            clients = [server.client()]
            for mode in ("bounded", "unbounded"):
                for n in sizes:
                    rows.append(row(server.url, clients, n, args.partitions, mode, args.requests))
    where = "3-master local cluster" if args.cluster else "private redis-server"
    print(f"{where}, {args.partitions} partitions, 5 python hooks, {args.requests} requests")
    head = (
        "mode",
        "workers",
        "blocked",
        "conns",
        "idle cmd/s",
        "sync cmd",
        "sync µs",
        "× 1w",
        "async cmd",
        "async µs",
        "× 1w",
    )
    print("".join(f"{h:>11}" for h in head))
    base = {r["mode"]: r for r in rows if r["workers"] == sizes[0]}
    for r in rows:
        b = base[r["mode"]]
        cells = (
            r["mode"],
            r["workers"],
            r["blocked"],
            r["connections"],
            f"{r['idle_cmd_s']:.0f}",
            f"{r['sync_cmd']:.2f}",
            f"{r['sync_us']:.1f}",
            f"{r['sync_us'] / b['sync_us']:.2f}",
            f"{r['async_cmd']:.2f}",
            f"{r['async_us']:.1f}",
            f"{r['async_us'] / b['async_us']:.2f}",
        )
        print("".join(f"{c!s:>11}" for c in cells))


if __name__ == "__main__":
    main()
