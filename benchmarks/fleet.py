"""Fleet scaling: N chain workers against one server and against a local Redis Cluster.

Run: ``python benchmarks/fleet.py [--workers 1,2,4] [--masters 3] [--seconds 4]
[--producers 2] [--in-flight 64]``

For each row it starts a private server (or a local cluster of M masters with one request
partition per master, ``HOOKBUS_PARTITIONS=M``), N chain worker processes (each serves
every partition) with the 5 python hooks of ``benchmarks/blocking.py``, and P producer
processes, each an :class:`~hookbus.AsyncHookBus` with K requests in flight over many
session ids (so requests spread over the partitions). It prints, per row: requests per
second, p50/p99 latency, Redis CPU per request (``used_cpu_user + used_cpu_sys`` of every
server, summed), the ceiling that CPU implies per Redis core, each master's share of the
Redis CPU, and the scaling efficiency against the single-server row with one worker; then,
per master: Redis CPU per request, clients blocked in XREADGROUP and client connections
(with the fleet idle, reader slots settled) and the idle fleet's commands per second.
The chain workers keep the default bounded readers (``workers.readers_per_partition``).

On a machine with few cores the producers, workers and servers share them, so req/s is
bounded by the host, not by Redis; the figures that carry over to a many-core machine are
Redis CPU per request, the per-core ceiling it implies and the masters' shares.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from tests.cluster_fixture import (  # noqa: E402
    LocalCluster,
    LocalServer,
    commandstats,
    cpu_seconds,
    delta,
    namespace_spread,
)

WORKER_CODE = r"""
import sys, threading
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

def make(i):
    def hook(event):
        command = event.payload.get("tool_input", {}).get("command", "")
        if "rm -rf /" in command:
            return HookResult(outcome="deny", reason=f"hook {i}: destructive command")
        return None
    return hook

for i in range(5):
    registry.register(f"guard{i}", make(i), events=["PreToolUse"], priority=10 + i)
stop = threading.Event()
with graceful_signals(stop):
    run_chain_worker(settings, registry=registry, stop_event=stop, supervise=False)
"""

PRODUCER_CODE = r"""
import asyncio, json, sys, time
from hookbus import AsyncHookBus
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event

url, ns, partitions = sys.argv[1], sys.argv[2], int(sys.argv[3])
seconds, in_flight, start_at = float(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])

async def main():
    settings = Settings(redis_url=url, namespace=ns, partitions=partitions)
    samples, degraded = [], 0
    async with AsyncHookBus(settings) as bus:
        for i in range(in_flight):  # warm every lane
            await bus.request(Event(kind="PreToolUse", session_id=f"w{i}"), deadline_ms=5_000)
        while time.time() < start_at:
            await asyncio.sleep(0.005)
        end = time.perf_counter() + seconds

        async def caller(i):
            nonlocal degraded
            n = 0
            while time.perf_counter() < end:
                n += 1
                event = Event(
                    kind="PreToolUse",
                    session_id=f"s{i}-{n % 8}",
                    payload={"tool_name": "Bash", "tool_input": {"command": "ls -la"}},
                )
                started = time.perf_counter()
                decision = await bus.request(event, deadline_ms=5_000)
                samples.append((time.perf_counter() - started) * 1e6)
                degraded += decision.degraded

        await asyncio.gather(*(caller(i) for i in range(in_flight)))
    print(json.dumps({"n": len(samples), "degraded": degraded, "samples": samples}))

asyncio.run(main())
"""


@dataclass
class Row:
    label: str
    workers: int
    masters: int
    rate: float
    p50_us: float
    p99_us: float
    degraded: int
    cpu_us_per_request: float
    shares: list[float]
    commands_per_request: float
    #: per master: Redis CPU µs per request, readers blocked in XREADGROUP, client
    #: connections and the idle fleet's commands per second (before the producers start)
    cpu_us_per_master: list[float]
    blocked: list[int]
    connections: list[int]
    idle_commands_s: list[float]


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT))


def _wait_workers(url: str, ns: str, n: int) -> None:
    from hookbus.bus.connection import bus_client
    from hookbus.bus.keys import Keys
    from hookbus.bus.settings.loader import Settings
    from hookbus.workers.fleet.heartbeat import alive_workers

    client = bus_client(Settings(redis_url=url, namespace=ns))
    keys = Keys.for_namespace(ns)
    end = time.monotonic() + 60
    while len(alive_workers(client, keys, dead_after_ms=5_000, role="chain")) < n:
        if time.monotonic() > end:
            raise SystemExit("chain workers did not start within 60 s")
        time.sleep(0.1)


def run_row(
    label: str,
    url: str,
    servers: list[redis.Redis],
    partitions: int,
    args: argparse.Namespace,
    n_workers: int,
) -> Row:
    ns = f"fleet{uuid.uuid4().hex[:6]}"
    if partitions > 1:  # a namespace whose partitions sit on every master
        ns = namespace_spread(url, partitions, prefix="fleet")
    workers = [
        subprocess.Popen([sys.executable, "-c", WORKER_CODE, url, ns, str(partitions)], env=_env())
        for _ in range(n_workers)
    ]
    try:
        _wait_workers(url, ns, n_workers * partitions)
        time.sleep(2.5)  # reader slots settle (two rebalancing rounds)
        blocked, connections = _readers_and_connections(servers)
        # the fleet idle (heartbeats, leases, reclaim, cluster bus), before any producer
        idle_before = [cpu_seconds(s) for s in servers]
        idle_calls_before = [commandstats(s) for s in servers]
        idle_t0 = time.perf_counter()
        time.sleep(2.0)
        idle_cpu = [cpu_seconds(s) - b for s, b in zip(servers, idle_before, strict=True)]
        idle_calls = [
            _calls(b, commandstats(s)) for s, b in zip(servers, idle_calls_before, strict=True)
        ]
        idle_s = time.perf_counter() - idle_t0
        start_at = time.time() + 3.0
        argv = [
            *(sys.executable, "-c", PRODUCER_CODE, url, ns, str(partitions)),
            *(str(args.seconds), str(args.in_flight), str(start_at)),
        ]
        producers = [
            subprocess.Popen(
                argv,
                env=_env(),
                stdout=subprocess.PIPE,
            )
            for _ in range(args.producers)
        ]
        time.sleep(max(0.0, start_at - time.time()))
        cpu_before = [cpu_seconds(s) for s in servers]
        calls_before = [commandstats(s) for s in servers]
        run_t0 = time.perf_counter()
        outs = [p.communicate(timeout=args.seconds + 120)[0] for p in producers]
        cpu_after = [cpu_seconds(s) for s in servers]
        calls_after = [commandstats(s) for s in servers]
        run_s = time.perf_counter() - run_t0
    finally:
        for proc in workers:
            proc.terminate()
        for proc in workers:
            proc.wait(15)
    results = [json.loads(out.decode().strip().splitlines()[-1]) for out in outs]
    samples = sorted(x for r in results for x in r["samples"])
    n = len(samples)
    # the run's CPU less what the idle fleet costs over as long (run_s includes the
    # producers' teardown, so a little more idle is subtracted than ran: a few %)
    cpu = [
        max(0.0, after - before - idle * run_s / idle_s)
        for before, after, idle in zip(cpu_before, cpu_after, idle_cpu, strict=True)
    ]
    total_cpu = sum(cpu)
    calls = sum(_calls(b, a) for b, a in zip(calls_before, calls_after, strict=True))
    return Row(
        label=label,
        workers=n_workers,
        masters=len(servers),
        rate=n / args.seconds,
        p50_us=samples[n // 2],
        p99_us=samples[min(n - 1, int(n * 0.99))],
        degraded=sum(r["degraded"] for r in results),
        cpu_us_per_request=total_cpu * 1e6 / max(n, 1),
        shares=[c / total_cpu if total_cpu else 0.0 for c in cpu],
        commands_per_request=calls / max(n, 1),
        cpu_us_per_master=[c * 1e6 / max(n, 1) for c in cpu],
        blocked=blocked,
        connections=connections,
        idle_commands_s=[c / idle_s for c in idle_calls],
    )


#: What the benchmark itself sends (left out of the counts).
OWN_COMMANDS = ("info", "cluster", "ping", "client")


def _calls(before: dict[str, int], after: dict[str, int]) -> int:
    return sum(n for name, n in delta(before, after).items() if not name.startswith(OWN_COMMANDS))


def _readers_and_connections(servers: list[redis.Redis]) -> tuple[list[int], list[int]]:
    """Per master: clients blocked in XREADGROUP, and client connections (ours left out)."""
    blocked, connections = [], []
    for server in servers:
        clients = server.client_list()
        blocked.append(
            sum(
                1
                for c in clients
                if c.get("cmd") == "xreadgroup" and "b" in str(c.get("flags", ""))
            )
        )
        connections.append(len(clients) - 1)
    return blocked, connections


def print_masters(rows: list[Row]) -> None:
    print(
        f"\n{'setup':<24}{'workers':>8}  per master: CPU µs/req | blocked XREADGROUP | "
        "connections | idle commands/s"
    )
    for row in rows:
        cells = " | ".join(
            f"{cpu:5.1f} {b:3d} {c:4d} {i:6.1f}"
            for cpu, b, c, i in zip(
                row.cpu_us_per_master,
                row.blocked,
                row.connections,
                row.idle_commands_s,
                strict=True,
            )
        )
        print(f"{row.label:<24}{row.workers:>8}  {cells}")


#: Fleet sizes and master counts of the model table.
MODEL_WORKERS = (16, 64, 256)
MODEL_MASTERS = (1, 3, 6, 12)


def _line(x0: float, y0: float, x1: float, y1: float) -> tuple[float, float]:
    """(intercept, slope) of the line through two measured points."""
    slope = (y1 - y0) / (x1 - x0) if x1 != x0 else 0.0
    return y0 - slope * x0, slope


def print_model(rows: list[Row], measured_masters: int) -> None:
    """A model, not a measurement: the fleet sizes of :data:`MODEL_WORKERS` on
    :data:`MODEL_MASTERS` masters (one partition per master), extrapolated from the rows.

    - CPU per request: the 1-worker row's (one server for 1 master, the cluster's total for
      more), the same whatever the fleet (bounded readers: ``benchmarks/readers.py``);
    - idle commands/s: a line through the 1-worker and the largest row, per master: the
      namespace's own master (heartbeats, leases, clocks: per worker and per partition)
      and the others (their partitions' readers: bounded);
    - connections: the same kind of line per master;
    - requests/s per master core: the core left after the idle commands (each costing
      what a command of a request costs) divided by the CPU per request.
    """
    single = sorted((r for r in rows if r.masters == 1), key=lambda r: r.workers)
    cluster = sorted((r for r in rows if r.masters > 1), key=lambda r: r.workers)
    if len(single) < 2 or len(cluster) < 2:
        print("\n(model: needs two worker counts on one server and on the cluster)")
        return
    per_command_us = single[0].cpu_us_per_request / single[0].commands_per_request
    s0, s1 = single[0], single[-1]
    c0, c1 = cluster[0], cluster[-1]
    home = max(range(len(c0.idle_commands_s)), key=lambda m: c0.idle_commands_s[m])
    others = [m for m in range(len(c0.idle_commands_s)) if m != home]

    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    fits = {
        "idle 1": _line(s0.workers, s0.idle_commands_s[0], s1.workers, s1.idle_commands_s[0]),
        "conn 1": _line(s0.workers, s0.connections[0], s1.workers, s1.connections[0]),
        "idle home": _line(
            c0.workers, c0.idle_commands_s[home], c1.workers, c1.idle_commands_s[home]
        ),
        "conn home": _line(c0.workers, c0.connections[home], c1.workers, c1.connections[home]),
        "idle other": _line(
            c0.workers,
            mean([c0.idle_commands_s[m] for m in others]),
            c1.workers,
            mean([c1.idle_commands_s[m] for m in others]),
        ),
        "conn other": _line(
            c0.workers,
            mean([float(c0.connections[m]) for m in others]),
            c1.workers,
            mean([float(c1.connections[m]) for m in others]),
        ),
    }
    print(
        f"\nMODEL (extrapolated from the rows above, not measured): one partition per master;"
        f" CPU/request {s0.cpu_us_per_request:.1f} µs on one server, "
        f"{c0.cpu_us_per_request:.1f} µs in total on {measured_masters} masters; "
        f"{per_command_us:.1f} µs per idle command"
    )
    print(
        f"{'workers':>8}{'masters':>8}{'req/s per master core':>24}{'connections':>18}"
        f"{'idle cmd/s':>20}   (namespace's master / each other)"
    )
    for workers in MODEL_WORKERS:
        for masters in MODEL_MASTERS:
            cells = _model_cell(fits, workers, masters, measured_masters, per_command_us)
            cpu = s0.cpu_us_per_request if masters == 1 else c0.cpu_us_per_request
            left = max(0.0, 1.0 - cells[0] * per_command_us / 1e6)
            rate = left * 1e6 / cpu
            conns = f"{cells[2]:.0f}" if masters == 1 else f"{cells[2]:.0f} / {cells[3]:.0f}"
            idle = f"{cells[0]:.0f}" if masters == 1 else f"{cells[0]:.0f} / {cells[1]:.0f}"
            print(f"{workers:>8}{masters:>8}{rate:>24.0f}{conns:>18}{idle:>20}")


def _model_cell(
    fits: dict[str, tuple[float, float]],
    workers: int,
    masters: int,
    measured_masters: int,
    per_command_us: float,
) -> tuple[float, float, float, float]:
    """(idle cmd/s on the namespace's master, on each other, connections on each)."""
    if masters == 1:
        a, b = fits["idle 1"]
        ka, kb = fits["conn 1"]
        return a + b * workers, 0.0, ka + kb * workers, 0.0
    # the per-worker share of the namespace's master grows with the partitions
    a, b = fits["idle home"]
    home = a + b * workers * masters / measured_masters
    oa, ob = fits["idle other"]
    ka, kb = fits["conn home"]
    oka, okb = fits["conn other"]
    return home, oa + ob * workers, ka + kb * workers, oka + okb * workers


def print_table(rows: list[Row]) -> None:
    base = rows[0].rate if rows else 1.0
    print(
        f"\n{'setup':<24}{'workers':>8}{'req/s':>9}{'p50 µs':>9}{'p99 µs':>9}"
        f"{'degr.':>7}{'cmds/req':>9}{'CPU µs/req':>11}{'req/s/core':>11}{'eff.':>7}"
        "  master shares"
    )
    for row in rows:
        ceiling = 1e6 / row.cpu_us_per_request if row.cpu_us_per_request else 0.0
        eff = row.rate / (base * row.workers) if base else 0.0
        shares = " ".join(f"{s:.0%}" for s in row.shares)
        print(
            f"{row.label:<24}{row.workers:>8}{row.rate:>9.0f}{row.p50_us:>9.0f}"
            f"{row.p99_us:>9.0f}{row.degraded:>7}{row.commands_per_request:>9.2f}"
            f"{row.cpu_us_per_request:>11.1f}"
            f"{ceiling:>11.0f}{eff:>7.2f}  {shares}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    parser.add_argument("--masters", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--in-flight", type=int, default=64, help="per producer")
    parser.add_argument("--no-cluster", action="store_true")
    args = parser.parse_args()
    counts = [int(x) for x in args.workers.split(",")]
    rows: list[Row] = []
    print(
        f"fleet benchmark: {os.cpu_count()} cores, {args.producers} async producers x "
        f"{args.in_flight} in flight, {args.seconds:g} s per row"
    )
    with tempfile.TemporaryDirectory(prefix="hookbus-fleet-") as tmp:
        server = LocalServer(Path(tmp) / "single")
        server.start()
        try:
            for n in counts:
                rows.append(run_row("single server", server.url, [server.client()], 1, args, n))
        finally:
            server.stop()
        if not args.no_cluster:
            cluster = LocalCluster(Path(tmp) / "cluster", args.masters)
            cluster.start()
            try:
                for n in counts:
                    label = f"cluster {args.masters} masters"
                    rows.append(
                        run_row(label, cluster.url, cluster.node_clients(), args.masters, args, n)
                    )
            finally:
                cluster.stop()
    print_table(rows)
    print_masters(rows)
    print_model(rows, args.masters)


if __name__ == "__main__":
    main()
