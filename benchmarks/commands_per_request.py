"""What one blocking request costs Redis: commands (per command) and server CPU, end to end.

Run: ``python benchmarks/commands_per_request.py [--requests N] [--async-in-flight K]``

Starts a private redis-server (nobody else's commands in the counts), one chain worker with
the 5 python hooks of ``benchmarks/blocking.py``, warms up, then:

1. counts ``INFO commandstats`` deltas (commands run inside scripts count, and so does the
   EVALSHA that runs them) and ``used_cpu_user + used_cpu_sys`` over N sequential requests
   of the sync client, and subtracts what the same fleet costs idle for as long
   (heartbeats, leases, reclaim, clock), measured just before;
2. the same over N requests of the asyncio client with K in flight (batched reads and acks);
3. request p50 and PING p50, each measured alone (not interleaved), same client, same run.

Prints the breakdown per command and the totals per request. :func:`measure` is what the
integration test ``tests/integration/test_commands_per_request.py`` asserts on.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from blocking import event, start_workers, stop_workers  # noqa: E402

from hookbus import AsyncHookBus, HookBus  # noqa: E402
from hookbus.bus.settings.loader import Settings  # noqa: E402
from tests.cluster_fixture import commandstats, cpu_seconds, delta, local_server  # noqa: E402

#: Commands the measurement itself sends (left out of the counts).
OWN_COMMANDS = frozenset({"info", "ping"})


@dataclass
class Cost:
    """Redis's cost of ``requests`` requests, background (idle fleet) subtracted."""

    requests: int
    calls: dict[str, float] = field(default_factory=dict)
    cpu_s: float = 0.0
    background_calls: dict[str, int] = field(default_factory=dict)
    #: How long the requests took: the ack ledger settles on a timer, so its share of each
    #: request's commands is a rate times this, divided by ``requests``.
    seconds: float = 0.0

    @property
    def commands_per_request(self) -> float:
        return sum(self.calls.values()) / self.requests

    @property
    def cpu_us_per_request(self) -> float:
        return self.cpu_s * 1e6 / self.requests

    def per_command(self) -> list[tuple[str, float]]:
        rows = [(name, calls / self.requests) for name, calls in self.calls.items()]
        return sorted(rows, key=lambda row: -row[1])


def _snapshot(client: object) -> tuple[dict[str, int], float, float]:
    return commandstats(client), cpu_seconds(client), time.perf_counter()  # type: ignore[arg-type]


def _cost(client: object, run: object, requests: int, idle_s: float) -> Cost:
    """Idle for ``idle_s`` (background rate), then ``run()``; the run's cost minus background."""
    s0, c0, t0 = _snapshot(client)
    time.sleep(idle_s)
    s1, c1, t1 = _snapshot(client)
    run()  # type: ignore[operator]
    s2, c2, t2 = _snapshot(client)
    idle = {k: v for k, v in delta(s0, s1).items() if k not in OWN_COMMANDS}
    busy = {k: v for k, v in delta(s1, s2).items() if k not in OWN_COMMANDS}
    scale = (t2 - t1) / (t1 - t0)
    calls = {k: max(0.0, busy.get(k, 0) - idle.get(k, 0) * scale) for k in busy}
    cpu = max(0.0, (c2 - c1) - (c1 - c0) * scale)
    return Cost(requests, {k: v for k, v in calls.items() if v > 0}, cpu, idle, t2 - t1)


def measure(
    url: str, client: object, ns: str, requests: int, in_flight: int, idle_s: float = 1.0
) -> tuple[Cost, Cost | None, float, float]:
    """Sync cost, async cost (None when ``in_flight`` is 0), request p50 and PING p50 (µs)."""
    settings = Settings(redis_url=url, namespace=ns)
    with HookBus(settings) as bus:
        for _ in range(300):  # warm: connections, script cache, liveness cache
            bus.request(event(), deadline_ms=2_000)

        def sync_run() -> None:
            for _ in range(requests):
                decision = bus.request(event(), deadline_ms=2_000)
                assert not decision.degraded, decision.reason

        sync_cost = _cost(client, sync_run, requests, idle_s)
        request_us = _timed(lambda: bus.request(event(), deadline_ms=2_000), requests)
        ping_us = _timed(bus.client.ping, requests)
    async_cost = None
    if in_flight:
        async_cost = _cost(
            client, lambda: asyncio.run(_async_run(settings, requests, in_flight)), requests, idle_s
        )
    return sync_cost, async_cost, statistics.median(request_us), statistics.median(ping_us)


async def _async_run(settings: Settings, requests: int, in_flight: int) -> None:
    async with AsyncHookBus(settings) as bus:
        left = requests

        async def caller() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                decision = await bus.request(event(), deadline_ms=2_000)
                assert not decision.degraded, decision.reason

        await asyncio.gather(*(caller() for _ in range(in_flight)))


def _timed(fn: object, n: int) -> list[float]:
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        fn()  # type: ignore[operator]
        samples.append((time.perf_counter() - started) * 1e6)
    return samples


def print_cost(title: str, cost: Cost) -> None:
    print(f"\n{title}: {cost.requests} requests")
    print(f"{'command':<24}{'calls/request':>14}")
    for name, per in cost.per_command():
        print(f"{name:<24}{per:>14.3f}")
    print(f"{'total':<24}{cost.commands_per_request:>14.3f}")
    print(f"Redis CPU per request: {cost.cpu_us_per_request:.1f} µs (user+sys, idle subtracted)")
    idle = ", ".join(f"{k} {v}" for k, v in sorted(cost.background_calls.items()))
    print(f"idle fleet over the same time: {idle or 'nothing'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2_000)
    parser.add_argument("--async-in-flight", type=int, default=32)
    parser.add_argument(
        "--compare-rules",
        action="store_true",
        help="sync cost with no rule, a [limit], a [lock] and both, side by side in one run",
    )
    parser.add_argument(
        "--decision-log",
        choices=("all", "not_allow", "off"),
        default="all",
        help="the chain worker's streams.decision_log (the requests are plain allows)",
    )
    args = parser.parse_args()
    os.environ["HOOKBUS_STREAMS__DECISION_LOG"] = args.decision_log  # the worker's env
    if args.compare_rules:
        compare_rules(args.requests)
        return
    with local_server() as server:
        client = server.client()
        ns = f"cpr{uuid.uuid4().hex[:8]}"
        procs = start_workers(server.url, ns, 1, client)
        try:
            sync_cost, async_cost, req50, ping50 = measure(
                server.url, client, ns, args.requests, args.async_in_flight
            )
        finally:
            stop_workers(procs)
        print(
            f"private redis-server {server.url}, 1 chain worker, 5 python hooks, "
            f"decision log: {args.decision_log}"
        )
        print_cost("sync client, one request at a time", sync_cost)
        if async_cost is not None:
            print_cost(f"asyncio client, {args.async_in_flight} in flight", async_cost)
        print("\nlatency, each measured alone, same client")
        print(f"request p50 {req50:.0f} µs   PING p50 {ping50:.0f} µs   ratio {req50 / ping50:.2f}")


def compare_rules(requests: int) -> None:
    """What a manifest's ``[limit]`` and ``[lock]`` add to a request: one fleet per variant on
    one private server, sync client, background subtracted."""
    rows = []
    with local_server() as server:
        client = server.client()
        for rules in ("", "limit", "lock", "limit,lock"):
            os.environ["HOOKBUS_BENCH_RULES"] = rules
            ns = f"cpr{uuid.uuid4().hex[:8]}"
            procs = start_workers(server.url, ns, 1, client)
            try:
                cost, _none, req50, ping50 = measure(server.url, client, ns, requests, 0)
            finally:
                stop_workers(procs)
            rows.append((rules or "none", cost, req50 / ping50))
    os.environ.pop("HOOKBUS_BENCH_RULES", None)
    base = rows[0][1]
    print(f"private redis-server, 1 chain worker, 5 python hooks, {requests} sync requests each")
    head = ("rules", "cmd/request", "+ vs none", "EVALSHA", "Redis µs", "p50/PING")
    print(
        f"{head[0]:<12}"
        + "".join(f"{h:>{w}}" for h, w in zip(head[1:], (12, 11, 9, 10, 10), strict=True))
    )
    for name, cost, ratio in rows:
        evalsha = cost.calls.get("evalsha", 0.0) / cost.requests
        extra = cost.commands_per_request - base.commands_per_request
        print(
            f"{name:<12}{cost.commands_per_request:>12.2f}{extra:>+11.2f}{evalsha:>9.2f}"
            f"{cost.cpu_us_per_request:>10.1f}{ratio:>10.2f}"
        )


if __name__ == "__main__":
    main()
