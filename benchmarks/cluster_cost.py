"""What a blocking request costs a Redis Cluster against one server, per master and per
command, at fixed loads that do not saturate the host, in one run.

Run: ``python benchmarks/cluster_cost.py [--requests 1000] [--rate 2000] [--seconds 3]
[--partitions 3] [--rounds 1]``

For each setup (a private server with one partition; the same with ``--partitions``; a local
3-master cluster with one partition per master) it starts one chain worker with the 5 python
hooks of ``benchmarks/blocking.py`` and measures, on every master:

1. the idle fleet for 2 s (heartbeats, leases, reclaim, blocked reads timing out, the
   cluster bus): its commands, their time and the server's CPU, per second;
2. ``--requests`` sequential requests of the sync client;
3. async requests launched at a fixed ``--rate`` for ``--seconds`` (an asyncio client,
   whatever number in flight that takes).

Each phase's cost is its ``INFO commandstats`` (calls and ``usec``) and ``used_cpu_user +
used_cpu_sys`` deltas less the idle rates times its duration, divided by the requests.
Sessions cycle over 64 ids, so requests spread over the partitions. It prints per setup and
phase the Redis CPU per request on each master and in total, the ratio to the one-server,
one-partition row, and the attribution by command (calls and µs inside the command per
request, summed over masters); ``other`` is CPU outside commands (reading and writing
sockets, the event loop, blocked clients served, the cluster bus).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from blocking import start_workers, stop_workers  # noqa: E402

from hookbus import AsyncHookBus, HookBus  # noqa: E402
from hookbus.bus.settings.loader import Settings  # noqa: E402
from hookbus.bus.wire import Event  # noqa: E402
from tests.cluster_fixture import (  # noqa: E402
    cpu_seconds,
    local_cluster,
    local_server,
    namespace_spread,
)

#: Commands the measurement itself sends (left out).
OWN = frozenset({"info", "ping", "cluster|slots", "cluster|info", "client|list"})
#: How long the idle fleet is watched before each phase, in seconds.
IDLE_S = 2.0
#: Session ids the requests cycle over (spread over the partitions).
SESSIONS = 64

Stats = dict[str, tuple[int, int]]  # command: (calls, usec)


def stats(client: Any) -> Stats:
    raw = client.info("commandstats")
    return {
        name.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"]))
        for name, v in raw.items()
        if name.removeprefix("cmdstat_") not in OWN
    }


def events(client: Any) -> int:
    """Read and write events the server handled so far (its wake-ups for clients)."""
    info = client.info("stats")
    return int(info.get("total_reads_processed", 0)) + int(info.get("total_writes_processed", 0))


@dataclass
class Snap:
    stats: list[Stats]
    cpu: list[float]
    events: list[int]
    at: float

    @classmethod
    def take(cls, clients: list[Any]) -> Snap:
        return cls(
            [stats(c) for c in clients],
            [cpu_seconds(c) for c in clients],
            [events(c) for c in clients],
            time.time(),
        )


@dataclass
class Idle:
    """The idle fleet on each master: commands/s, CPU ms/s, busiest commands, clients."""

    commands_s: list[float]
    cpu_ms_s: list[float]
    top: list[list[tuple[str, float]]]
    blocked: list[int]
    connections: list[int]

    @classmethod
    def of(cls, clients: list[Any], i0: Snap, i1: Snap) -> Idle:
        span = i1.at - i0.at
        rates = [
            {k: c / span for k, (c, _u) in _diff(a, b).items() if c}
            for a, b in zip(i0.stats, i1.stats, strict=True)
        ]
        clients_info = [c.info("clients") for c in clients]
        return cls(
            [sum(r.values()) for r in rates],
            [(b - a) * 1e3 / span for a, b in zip(i0.cpu, i1.cpu, strict=True)],
            [sorted(r.items(), key=lambda kv: -kv[1])[:4] for r in rates],
            [int(i.get("blocked_clients", 0)) for i in clients_info],
            [int(i.get("connected_clients", 0)) - 1 for i in clients_info],  # less ours
        )


@dataclass
class Cost:
    """One phase: per master, CPU µs and per command (calls, µs) per request."""

    requests: int
    seconds: float
    cpu_us: list[float] = field(default_factory=list)
    commands: list[dict[str, tuple[float, float]]] = field(default_factory=list)
    #: read + write events per request, per master
    events: list[float] = field(default_factory=list)

    @property
    def total_us(self) -> float:
        return sum(self.cpu_us)


def _diff(a: Stats, b: Stats) -> dict[str, tuple[int, int]]:
    return {k: (v[0] - a.get(k, (0, 0))[0], v[1] - a.get(k, (0, 0))[1]) for k, v in b.items()}


def cost(idle: tuple[Snap, Snap], run: tuple[Snap, Snap], requests: int) -> Cost:
    """``run``'s deltas less ``idle``'s rates over as long, per request."""
    (i0, i1), (r0, r1) = idle, run
    scale = (r1.at - r0.at) / (i1.at - i0.at)
    out = Cost(requests, r1.at - r0.at)
    for m in range(len(r0.cpu)):
        idle_cpu = (i1.cpu[m] - i0.cpu[m]) * scale
        out.cpu_us.append(max(0.0, r1.cpu[m] - r0.cpu[m] - idle_cpu) * 1e6 / requests)
        idle_events = (i1.events[m] - i0.events[m]) * scale
        out.events.append(max(0.0, r1.events[m] - r0.events[m] - idle_events) / requests)
        idle_d = _diff(i0.stats[m], i1.stats[m])
        row: dict[str, tuple[float, float]] = {}
        for name, (calls, usec) in _diff(r0.stats[m], r1.stats[m]).items():
            ic, iu = idle_d.get(name, (0, 0))
            c, u = calls - ic * scale, usec - iu * scale
            if c > 0.5:
                row[name] = (c / requests, max(0.0, u) / requests)
        out.commands.append(row)
    return out


def event(i: int) -> Event:
    return Event(
        kind="PreToolUse",
        session_id=f"s{i % SESSIONS}",
        agent_id="bench",
        payload={"tool_name": "Bash", "tool_input": {"command": "ls -la"}},
    )


def sequential(settings: Settings, requests: int) -> int:
    with HookBus(settings) as bus:
        for i in range(requests):
            decision = bus.request(event(i), deadline_ms=2_000)
            assert not decision.degraded, decision.reason
    return requests


async def _paced(settings: Settings, rate: float, seconds: float) -> int:
    """Requests launched on a fixed schedule (``rate`` per second); returns how many."""
    async with AsyncHookBus(settings) as bus:
        tasks: list[asyncio.Task[Any]] = []
        n = int(rate * seconds)
        start = time.perf_counter()
        for i in range(n):
            delay = start + i / rate - time.perf_counter()
            if delay > 0.001:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(bus.request(event(i), deadline_ms=2_000)))
        decisions = await asyncio.gather(*tasks)
    degraded = sum(d.degraded for d in decisions)
    assert not degraded, f"{degraded} degraded answers"
    return n


def warm(settings: Settings) -> None:
    sequential(settings, 200)
    asyncio.run(_paced(settings, 500, 0.4))


def measure(clients: list[Any], settings: Settings, args: argparse.Namespace) -> dict[str, Any]:
    """Idle, then sequential; idle, then paced async. Returns {phase: (cost, req/s)} and
    ``idle``: the first idle window."""
    out: dict[str, Any] = {}
    phases: dict[str, Callable[[], int]] = {
        "sequential": lambda: sequential(settings, args.requests),
        f"async {args.rate:g}/s": lambda: asyncio.run(_paced(settings, args.rate, args.seconds)),
    }
    for name, run in phases.items():
        i0 = Snap.take(clients)
        time.sleep(IDLE_S)
        i1 = Snap.take(clients)
        r0 = Snap.take(clients)
        n = run()
        r1 = Snap.take(clients)
        out[name] = (cost((i0, i1), (r0, r1), n), n / (r1.at - r0.at))
        out.setdefault("idle", Idle.of(clients, i0, i1))
    return out


def run_setup(label: str, url: str, clients: list[Any], partitions: int, args: Any) -> Any:
    os.environ["HOOKBUS_PARTITIONS"] = str(partitions)  # the worker's and ours
    ns = f"cc{uuid.uuid4().hex[:8]}"
    if len(clients) > 1:
        ns = namespace_spread(url, partitions, prefix="cc")
    settings = Settings(redis_url=url, namespace=ns, partitions=partitions)
    from hookbus.bus.connection import bus_client

    procs = start_workers(url, ns, 1, bus_client(settings))
    try:
        time.sleep(1.0)  # every partition's loop reading
        warm(settings)
        return label, measure(clients, settings, args)
    finally:
        stop_workers(procs)


def report(results: list[Any]) -> None:
    print("\nidle fleet, per master: commands/s, CPU ms/s, blocked clients, connections")
    for label, phases in results:
        idle = phases.pop("idle")
        for m, top in enumerate(idle.top):
            busiest = ", ".join(f"{k} {v:.1f}" for k, v in top)
            print(
                f"{label:<28} master {m}: {idle.commands_s[m]:6.1f} cmd/s "
                f"{idle.cpu_ms_s[m]:5.2f} ms/s  blocked {idle.blocked[m]:2d}  "
                f"conns {idle.connections[m]:2d}  ({busiest})"
            )
    base = {phase: c.total_us for phase, (c, _r) in results[0][1].items()}
    print("\nper request: Redis CPU µs (total, ratio, per master), read+write events")
    for label, phases in results:
        for phase, (c, rate) in phases.items():
            per_master = " ".join(f"{x:6.1f}" for x in c.cpu_us)
            print(
                f"{label:<28} {phase:<14} {rate:7.0f} req/s  CPU µs/req total "
                f"{c.total_us:6.1f} ({c.total_us / base[phase]:.2f}x)  per master {per_master}"
                f"  events/req {sum(c.events):5.2f}"
            )
    print("\nattribution: calls / µs inside the command, per request, summed over masters")
    for phase in base:
        names: dict[str, None] = {}
        for _label, phases in results:
            for row in phases[phase][0].commands:
                names.update(dict.fromkeys(row))
        print(f"\n{phase}")
        print(f"{'command':<22}" + "".join(f"{label[:24]:>26}" for label, _p in results))
        for name in sorted(names):
            cells = []
            for _label, phases in results:
                rows = phases[phase][0].commands
                calls = sum(r.get(name, (0.0, 0.0))[0] for r in rows)
                usec = sum(r.get(name, (0.0, 0.0))[1] for r in rows)
                cells.append(f"{calls:10.3f} / {usec:6.2f} µs" if calls else f"{'-':>23}")
            print(f"{name:<22}" + "".join(f"{c:>26}" for c in cells))
        others = []
        for _label, phases in results:
            c = phases[phase][0]
            inside = sum(u for row in c.commands for _n, (_c, u) in row.items())
            others.append(f"{c.total_us - inside:6.2f} µs")
        print(f"{'other (I/O, loop)':<22}" + "".join(f"{c:>26}" for c in others))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=2000.0)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    print(
        f"cluster cost: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, "
        f"1 chain worker, {args.requests} sequential requests, async at {args.rate:g}/s "
        f"for {args.seconds:g} s, {args.rounds} round(s)"
    )
    rounds: list[list[Any]] = []
    with local_server() as server, local_cluster(3) as cluster:
        for _ in range(args.rounds):
            rounds.append(
                [
                    run_setup("one server, 1 partition", server.url, [server.client()], 1, args),
                    run_setup(
                        f"one server, {args.partitions} partitions",
                        server.url,
                        [server.client()],
                        args.partitions,
                        args,
                    ),
                    run_setup(
                        f"3 masters, {args.partitions} partitions",
                        cluster.url,
                        cluster.node_clients(),
                        args.partitions,
                        args,
                    ),
                ]
            )
    for i, results in enumerate(rounds):
        print(f"\n== round {i + 1}")
        report(results)
    if len(rounds) > 1:
        print("\nmedian over rounds, total CPU µs/req and ratio to one server, 1 partition:")
        for s in range(len(rounds[0])):
            for phase in [p for p in rounds[0][0][1] if p != "idle"]:
                totals = [r[s][1][phase][0].total_us for r in rounds]
                ratios = [r[s][1][phase][0].total_us / r[0][1][phase][0].total_us for r in rounds]
                print(
                    f"   {rounds[0][s][0]:<28} {phase:<14} {statistics.median(totals):6.1f} µs"
                    f"  {statistics.median(ratios):.2f}x"
                )
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
