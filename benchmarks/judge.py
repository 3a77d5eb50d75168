"""What a judge hook costs a request, beside a plain python guard, in one run.

Four chains of one PreToolUse hook each, run through ``HookRegistry.run`` (the chain a
worker runs, with the fleet's shared state on a real Redis), sequentially and from 8
threads at once:

* ``python``: a python guard that looks at the command (the floor);
* ``judge, cache hit``: an llm hook whose verdict for this input is in the shared cache
  (``cache_ttl``): one Redis round trip (``judge.lua``), no model call;
* ``judge, 50 ms model``: the same hook with the cache off, against a fake
  OpenAI-compatible server that answers after 50 ms (a small model on a GPU answers a
  verdict of a dozen tokens in about that);
* ``judge, 50 ms model, 8 inputs``: 8 threads each asking about its own command, with the
  cache on: eight model calls at once, bounded by ``max_concurrency``, then cache hits.

Prints requests per second and p50/p99 latency per chain (ms). The rounds interleave the
contenders, so each sees the same host noise: read ratios of one run.

Run: ``.venv/bin/python benchmarks/judge.py [--embedded] [--seconds 3]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event, HookResult
from hookbus.hooks.loader import load_hooks
from hookbus.hooks.registry import HookRegistry
from tests.judge_helpers import fake_judge, verdict, write_judge_hook

MODEL_S = 0.05
THREADS = 8


def event(command: str) -> Event:
    return Event(
        kind="PreToolUse", payload={"tool_name": "Bash", "tool_input": {"command": command}}
    )


def python_registry() -> HookRegistry:
    registry = HookRegistry()

    def guard(e: Event) -> HookResult | None:
        command = str((e.payload.get("tool_input") or {}).get("command", ""))
        return HookResult(outcome="deny", reason="prod") if "prod" in command else None

    registry.register("guard", guard, events=["PreToolUse"])
    return registry


def judge_registry(settings: Settings, endpoint: str, root: Path, *, cached: bool) -> HookRegistry:
    folder = root / ("cached" if cached else "uncached")
    extra = 'cache_ttl = "10m"\nmax_concurrency = 16\n' if cached else "max_concurrency = 16\n"
    write_judge_hook(folder, endpoint, action_extra=extra)
    registry = HookRegistry.for_worker(
        settings, redis.Redis.from_url(settings.redis_url), notices=False
    )
    registry.replace_dynamic(load_hooks(folder).enabled, version="bench")
    return registry


def measure(run: Callable[[int], None], seconds: float, threads: int) -> tuple[float, list[float]]:
    """(requests per second, latencies in ms) of ``run(n)`` called for ``seconds``."""
    latencies: list[float] = []
    lock = threading.Lock()
    end = time.perf_counter() + seconds

    def loop(worker: int) -> int:
        n = 0
        while time.perf_counter() < end:
            started = time.perf_counter()
            run(worker * 1_000_000 + n)
            took = (time.perf_counter() - started) * 1000
            with lock:
                latencies.append(took)
            n += 1
        return n

    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        total = sum(pool.map(loop, range(threads)))
    return total / (time.perf_counter() - started), latencies


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(len(ordered) * q), len(ordered) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url", default=None)
    parser.add_argument("--embedded", action="store_true", help="start a private server")
    parser.add_argument("--seconds", type=float, default=3.0, help="per contender and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    server = None
    url = args.redis_url or "redis://127.0.0.1:6379/0"
    if args.embedded:
        from hookbus.bus.embedded import EmbeddedServer

        server = EmbeddedServer()
        url = server.start()
    settings = Settings(redis_url=url, namespace=f"judge{uuid.uuid4().hex[:8]}")
    print(
        f"judge hook benchmark: {url}, model {MODEL_S * 1000:.0f} ms, "
        f"python {sys.version.split()[0]}"
    )
    try:
        with (
            fake_judge(
                lambda _: verdict("deny", "it touches production", delay_s=MODEL_S)
            ) as judge,
            tempfile.TemporaryDirectory() as tmp,
        ):
            root = Path(tmp)
            plain = python_registry()
            cached = judge_registry(settings, judge.endpoint, root, cached=True)
            uncached = judge_registry(settings, judge.endpoint, root, cached=False)
            cached.run(event("kubectl delete ns prod"), time_left_s=5)  # warm the cache
            contenders: dict[str, tuple[Callable[[int], None], int]] = {
                "python guard": (lambda n: plain.run(event("kubectl delete ns prod")), 1),
                "judge, cache hit": (
                    lambda n: cached.run(event("kubectl delete ns prod"), time_left_s=5),
                    1,
                ),
                "judge, 50 ms model": (
                    lambda n: uncached.run(event("kubectl delete ns prod"), time_left_s=5),
                    1,
                ),
                f"judge, 50 ms model, {THREADS} inputs": (
                    lambda n: cached.run(event(f"deploy {n // 1_000_000}"), time_left_s=5),
                    THREADS,
                ),
            }
            results: dict[str, list[tuple[float, list[float]]]] = {k: [] for k in contenders}
            for _ in range(args.rounds):
                for name, (run, threads) in contenders.items():
                    results[name].append(measure(run, args.seconds, threads))
            print(f"{'chain':38} {'req/s':>10} {'p50 ms':>8} {'p99 ms':>8}")
            for name, rounds in results.items():
                rate = statistics.median(r for r, _ in rounds)
                lat = [x for _, ls in rounds for x in ls]
                print(f"{name:38} {rate:10.0f} {pct(lat, 0.5):8.2f} {pct(lat, 0.99):8.2f}")
            print(f"model calls: {len(judge.calls)}")
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
