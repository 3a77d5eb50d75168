"""Blocking-path benchmark: hookbus request/reply against the per-event process it replaces.

Run: ``python benchmarks/blocking.py [--redis-url URL] [--embedded] [--requests N]``

Side by side, in one run, on one Redis:

(a) ``HookBus.request()`` through one chain worker process running 5 Python hooks;
(b) the way agent CLIs decide today: spawn a Python command-hook process per event that
    reads the event JSON on stdin and prints a decision (``sys.executable``, not a shim);
(c) a Redis PING round trip from the same client (the floor).

(a) and (c) are measured twice: interleaved (both see the same host noise) and each alone
(issue 16: interleaving inflates the PING, since every PING follows a request that woke the
worker, and flatters the ratio), in that order, in the same run.

Prints p50/p99 of each, the ratios a/b and a/c, and sustained requests per second with 1
and 2 chain workers, sync (one caller) and asyncio (32 requests in flight). Goals on a
2-core machine: a p50 >= 50x faster than b and <= 5x c; async >= 4,000 req/s with 2 workers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import redis

from hookbus import AsyncHookBus, HookBus
from hookbus.bus.keys import namespace_pattern
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event
from hookbus.workers.fleet.heartbeat import alive_workers

ROOT = Path(__file__).resolve().parents[1]

WORKER_CODE = r"""
import sys, threading
from hookbus.bus.wire import HookResult
from hookbus.bus.settings.loader import load_settings
from hookbus.hooks.registry import HookRegistry
from hookbus.workers.chain.worker import run_chain_worker
from hookbus.workers.fleet.signals import graceful_signals

url, ns = sys.argv[1], sys.argv[2]
settings = load_settings(overrides={"redis_url": url, "namespace": ns}).settings
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

# HOOKBUS_BENCH_RULES=limit,lock: fleet-wide rules as manifests declare them (allowing)
import os
from pathlib import Path
from hookbus.hooks.manifest import parse_toml
from hookbus.state.store import FleetState

RULES = {
    "limit": '[limit]\nkey = "{agent}:{tool}"\nmax = 1000000\nper = "1h"\n',
    "lock": '[lock]\nkey = "{session}"\nttl = "1h"\nrelease_on = ["SessionEnd"]\n',
}
wanted = [r for r in os.environ.get("HOOKBUS_BENCH_RULES", "").split(",") if r]
if wanted:
    registry.fleet_state = FleetState.from_settings(settings)
    for rule in wanted:
        text = f'name = "bench-{rule}"\nevents = ["PreToolUse"]\n' + RULES[rule]
        registry.register_manifest(parse_toml(text, Path(f"/bench/{rule}/HOOK.toml")))
stop = threading.Event()
with graceful_signals(stop):
    run_chain_worker(settings, registry=registry, stop_event=stop)
"""

COMMAND_HOOK = r"""
import json, sys
event = json.load(sys.stdin)
command = event.get("payload", {}).get("tool_input", {}).get("command", "")
if "rm -rf /" in command:
    decision = {"outcome": "deny", "reason": "destructive"}
else:
    decision = {"outcome": "allow"}
json.dump(decision, sys.stdout)
"""


def quantiles(samples_us: list[float]) -> tuple[float, float]:
    ordered = sorted(samples_us)
    p50 = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return p50, p99


def timed(fn: Callable[[], object], n: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1e6)
    return samples


def timed_pair(
    first: Callable[[], object], second: Callable[[], object], n: int, warmup: int
) -> tuple[list[float], list[float]]:
    for _ in range(warmup):
        first()
        second()
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(n):
        for fn, out in ((first, samples[0]), (second, samples[1])):
            started = time.perf_counter()
            fn()
            out.append((time.perf_counter() - started) * 1e6)
    return samples


def event() -> Event:
    return Event(
        kind="PreToolUse",
        session_id="bench",
        agent_id="bench",
        payload={"tool_name": "Bash", "tool_input": {"command": "ls -la"}},
    )


def start_workers(url: str, ns: str, n: int, client: redis.Redis) -> list[subprocess.Popen[bytes]]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = [
        subprocess.Popen([sys.executable, "-c", WORKER_CODE, url, ns], env=env) for _ in range(n)
    ]
    end = time.monotonic() + 30
    from hookbus.bus.keys import Keys

    keys = Keys.for_namespace(ns)
    while len(alive_workers(client, keys, dead_after_ms=5_000, role="chain")) < n:
        if time.monotonic() > end:
            raise SystemExit("chain workers did not start within 30 s")
        time.sleep(0.05)
    return procs


def stop_workers(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def sync_rate(settings: Settings, seconds: float) -> float:
    with HookBus(settings) as bus:
        done = 0
        end = time.perf_counter() + seconds
        started = time.perf_counter()
        while time.perf_counter() < end:
            decision = bus.request(event(), deadline_ms=2_000)
            assert not decision.degraded, decision.reason
            done += 1
        return done / (time.perf_counter() - started)


async def async_rate(settings: Settings, seconds: float, in_flight: int) -> float:
    async with AsyncHookBus(settings) as bus:
        await bus.request(event(), deadline_ms=2_000)
        done = 0
        degraded = 0
        end = time.perf_counter() + seconds

        async def caller() -> None:
            nonlocal done, degraded
            while time.perf_counter() < end:
                decision = await bus.request(event(), deadline_ms=2_000)
                done += 1
                degraded += decision.degraded

        started = time.perf_counter()
        await asyncio.gather(*(caller() for _ in range(in_flight)))
        elapsed = time.perf_counter() - started
        if degraded:
            print(f"    ({degraded} degraded answers)")
        return done / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url", default=os.environ.get("HOOKBUS_REDIS_URL"))
    parser.add_argument("--embedded", action="store_true", help="start a private server")
    parser.add_argument("--requests", type=int, default=3_000, help="samples for (a), (c)")
    parser.add_argument("--spawns", type=int, default=60, help="samples for (b)")
    parser.add_argument("--seconds", type=float, default=3.0, help="per throughput run")
    args = parser.parse_args()

    server = None
    url = args.redis_url or "redis://127.0.0.1:6379/0"
    if args.embedded:
        from hookbus.bus.embedded import EmbeddedServer

        server = EmbeddedServer()
        url = server.start()
    ns = f"bench{uuid.uuid4().hex[:8]}"
    settings = Settings(redis_url=url, namespace=ns)
    client = redis.Redis.from_url(url, protocol=2)
    print(f"hookbus blocking benchmark: {url} namespace {ns}, python {sys.version.split()[0]}")
    try:
        procs = start_workers(url, ns, 1, client)
        try:
            with HookBus(settings) as bus:
                # a and c interleaved, so both see the same host noise
                a, c = timed_pair(
                    lambda: bus.request(event(), deadline_ms=2_000),
                    bus.client.ping,
                    args.requests,
                    300,
                )
                # each alone: all the requests, then all the PINGs
                a_alone = timed(lambda: bus.request(event(), deadline_ms=2_000), args.requests, 300)
                c_alone = timed(bus.client.ping, args.requests, 300)
                deny = bus.request(
                    Event(
                        kind="PreToolUse",
                        payload={"tool_name": "Bash", "tool_input": {"command": "rm -rf /"}},
                    ),
                    deadline_ms=2_000,
                )
                assert deny.outcome == "deny" and not deny.degraded, deny
        finally:
            stop_workers(procs)

        with tempfile.TemporaryDirectory() as tmp:
            script = Path(tmp) / "hook.py"
            script.write_text(COMMAND_HOOK)
            payload = json.dumps(
                {
                    "kind": "PreToolUse",
                    "payload": {"tool_name": "Bash", "tool_input": {"command": "ls -la"}},
                    "pad": "x" * 800,
                }
            ).encode()

            def spawn() -> None:
                out = subprocess.run(
                    [sys.executable, str(script)], input=payload, capture_output=True, check=True
                )
                assert json.loads(out.stdout)["outcome"] == "allow"

            b = timed(spawn, args.spawns, 3)

        rows = [
            ("(a) HookBus.request, 1 chain worker, 5 python hooks", a),
            ("(b) spawn a python command hook per event", b),
            ("(c) redis PING round trip, same client", c),
            ("(a) measured alone", a_alone),
            ("(c) measured alone", c_alone),
        ]
        print(f"\n{'latency':<56}{'p50 µs':>10}{'p99 µs':>10}{'n':>7}")
        for name, samples in rows:
            p50, p99 = quantiles(samples)
            print(f"{name:<56}{p50:>10.0f}{p99:>10.0f}{len(samples):>7}")
        a50, b50, c50 = (quantiles(s)[0] for s in (a, b, c))
        print(
            f"\na/b p50 ratio: {a50 / b50:.4f}  (a is {b50 / a50:.0f}x faster than b; goal >= 50x)"
        )
        print(f"a/c p50 ratio: {a50 / c50:.2f}  (interleaved; goal <= 5)")
        alone = quantiles(a_alone)[0] / quantiles(c_alone)[0]
        print(f"a/c p50 ratio, each measured alone: {alone:.2f}  (issue 16 goal <= 3)")

        print(f"\n{'throughput (sustained, ' + str(args.seconds) + ' s each)':<56}{'req/s':>10}")
        for n_workers in (1, 2):
            procs = start_workers(url, ns, n_workers, client)
            try:
                rate = sync_rate(settings, args.seconds)
                print(f"{f'sync, 1 caller, {n_workers} chain worker(s)':<56}{rate:>10.0f}")
                rate = asyncio.run(async_rate(settings, args.seconds, 32))
                print(f"{f'async, 32 in flight, {n_workers} chain worker(s)':<56}{rate:>10.0f}")
            finally:
                stop_workers(procs)
    finally:
        keys = list(client.scan_iter(match=namespace_pattern(ns), count=1000))
        if keys:
            client.delete(*keys)
        client.close()
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
