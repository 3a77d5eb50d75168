"""Benchmark of the non-blocking path, each figure next to its baseline, in one run.

    python benchmarks/fanout.py [--redis-url URL] [--quick]

Prints:
1. publish latency (p50/p99) against a raw XADD of the same bytes (same MAXLEN ~);
2. publish_many events/s against raw pipelined XADD (batches of 100);
3. end to end, publish -> hook ran (p50/p99), one dispatcher and one RQ worker (none);
4. processed events/s with 1 and 2 RQ workers in fork and none isolation (one job/event);
5. processed events/s with batching on a telemetry hook, 2 RQ workers.

``--isolated [--rounds R]`` runs only the isolated one-event-at-a-time comparison on 2 RQ
workers (``none``): one job per event against packs, alternating in R rounds, each with the
recording hook (one Redis round trip per event, the hook's own) and with a hook that does
nothing (its runs counted from the decision log), and prints each round and the medians.

``--isolated --baseline REF`` compares packs instead: this tree's against those of the git
revision REF (extracted to a temporary folder; its workers import it through PYTHONPATH),
alternating in R rounds, and prints the medians and their ratio.

Workers are real processes (``hookbus worker``); the namespace is deleted at the end.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from tempfile import TemporaryDirectory

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hookbus.bus import decision_batch, eventlog, keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event, encode
from tests.fanout_helpers import (
    processes,
    spawn_worker,
    wait_for,
    worker_env,
    write_python_hook,
)

#: A hook that records the publish -> run latency of each event it sees (in µs).
LATENCY_HANDLER = """
import os, time, redis
_r = redis.Redis.from_url(os.environ["FANOUT_RECORD_URL"])
def latency(event):
    events = event if isinstance(event, list) else [event]
    now = time.time_ns()
    key = os.environ["FANOUT_RECORD_KEY"]
    _r.rpush(key + ":lat", *[(now - e.payload["t_ns"]) // 1000 for e in events])
"""


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def delete_namespace(client: redis.Redis, ns: str) -> None:
    for pattern in (keys.namespace_pattern(ns), f"rq:*{keys.rq_queue_name(ns)}*"):
        batch = list(client.scan_iter(match=pattern, count=1000))
        if batch:
            client.delete(*batch)
    client.srem("rq:queues", f"rq:queue:{keys.rq_queue_name(ns)}")


def sample_event(i: int = 0) -> Event:
    return Event(
        kind="PostToolUse",
        session_id="bench-session",
        agent_id="bench-agent",
        payload={"tool_name": "Bash", "duration_ms": 12, "i": i, "output": "x" * 60},
    )


def bench_publish(client: redis.Redis, settings: Settings, n: int) -> None:
    key = keys.events(settings.namespace)
    maxlen = settings.streams.events_maxlen
    events = [sample_event(i) for i in range(n)]
    raw = [encode(e) for e in events]
    ours: list[float] = []
    base: list[float] = []
    # interleave blocks of both so drift of the host hits them alike
    for block in range(0, n, 100):
        for i in range(block, min(n, block + 100)):
            t = time.perf_counter_ns()
            client.xadd(key, {b"e": raw[i]}, maxlen=maxlen, approximate=True)
            base.append((time.perf_counter_ns() - t) / 1000)
        for i in range(block, min(n, block + 100)):
            t = time.perf_counter_ns()
            eventlog.publish(client, settings, events[i])
            ours.append((time.perf_counter_ns() - t) / 1000)
    print(f"1. publish latency, {n} events of {len(raw[0])} B")
    print(f"   raw XADD      p50 {pct(base, 0.5):7.1f} µs   p99 {pct(base, 0.99):7.1f} µs")
    print(f"   publish()     p50 {pct(ours, 0.5):7.1f} µs   p99 {pct(ours, 0.99):7.1f} µs")
    print(f"   ratio p50 {pct(ours, 0.5) / pct(base, 0.5):.2f}x (goal <= 1.5x)")


def bench_publish_many(client: redis.Redis, settings: Settings, n: int) -> None:
    key = keys.events(settings.namespace)
    maxlen = settings.streams.events_maxlen
    events = [sample_event(i) for i in range(n)]
    raw = [encode(e) for e in events]
    rates_raw: list[float] = []
    rates_ours: list[float] = []
    for _ in range(3):
        t = time.perf_counter()
        for start in range(0, n, 100):
            with client.pipeline(transaction=False) as pipe:
                for data in raw[start : start + 100]:
                    pipe.xadd(key, {b"e": data}, maxlen=maxlen, approximate=True)
                pipe.execute()
        rates_raw.append(n / (time.perf_counter() - t))
        t = time.perf_counter()
        for start in range(0, n, 100):
            eventlog.publish_many(client, settings, events[start : start + 100])
        rates_ours.append(n / (time.perf_counter() - t))
    raw_rate, our_rate = statistics.median(rates_raw), statistics.median(rates_ours)
    print(f"2. publish_many, {n} events in batches of 100 (median of 3)")
    print(f"   raw pipelined XADD {raw_rate:9.0f} events/s")
    print(f"   publish_many()     {our_rate:9.0f} events/s   ({our_rate / raw_rate:.2f}x raw)")


def _drain(client: redis.Redis, record_key: str, expected: int, timeout_s: float) -> None:
    wait_for(lambda: client.hlen(record_key) >= expected, timeout_s, f"{expected} runs")


#: A hook that does nothing: what the bus itself costs per isolated run.
NOOP_HANDLER = "def telemetry(event):\n    return None\n"


class LoggedRuns:
    """Counts hook runs from the decision log as it grows (a pack's entry holds ``n``
    records, a single job's entry one), for hooks that record nothing themselves."""

    def __init__(self, client: redis.Redis, stream: str) -> None:
        self.client = client
        self.stream = stream
        self.last = b"0-0"
        self.count = 0

    def __call__(self) -> int:
        while True:
            entries = self.client.xrange(self.stream, min=b"(" + self.last, count=1000)
            if not entries:
                return self.count
            for entry_id, fields in entries:
                self.last = entry_id
                self.count += int(fields.get(decision_batch.COUNT_FIELD, b"1"))


def bench_end_to_end(url: str, hooks_root: Path, n: int) -> None:
    ns = f"bench-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(url)
    settings = Settings(redis_url=url, namespace=ns)
    record_key = f"{keys.namespace_pattern(ns).rstrip('*')}record"
    hooks = hooks_root / "e2e"
    folder = hooks / "latency"
    folder.mkdir(parents=True)
    (folder / "lat_handler.py").write_text(LATENCY_HANDLER)
    (folder / "HOOK.toml").write_text(
        'name = "latency"\nevents = ["PostToolUse"]\nblocking = false\n'
        '[action.python]\nentrypoint = "lat_handler:latency"\n'
    )
    env = worker_env(url, ns, record_key)
    try:
        with processes() as procs:
            procs.append(spawn_worker("fanout", hooks, env))
            procs.append(spawn_worker("rq", hooks, env, "--isolation", "none"))
            _warm_up(client, settings, lambda: client.llen(record_key + ":lat") >= 1)
            client.delete(record_key + ":lat")
            for i in range(n):
                event = Event(kind="PostToolUse", payload={"t_ns": time.time_ns(), "i": i})
                eventlog.publish(client, settings, event)
                time.sleep(0.01)
            wait_for(lambda: client.llen(record_key + ":lat") >= n, 60, "latency samples")
        lat = [int(v) / 1000 for v in client.lrange(record_key + ":lat", 0, -1)]
        print(f"3. end to end publish -> hook ran, {n} events 10 ms apart, 1 RQ worker (none)")
        print(f"   p50 {pct(lat, 0.5):7.2f} ms   p99 {pct(lat, 0.99):7.2f} ms")
    finally:
        delete_namespace(client, ns)


def _warm_up(client: redis.Redis, settings: Settings, done: Callable[[], bool]) -> None:
    """Publish until the first run shows: workers are up and the hook is loaded."""
    end = time.monotonic() + 30
    while time.monotonic() < end and not done():
        event = Event(kind="PostToolUse", payload={"t_ns": time.time_ns(), "warm": True})
        eventlog.publish(client, settings, event)
        time.sleep(0.2)
    if not done():
        raise SystemExit("workers did not start within 30 s")


def bench_throughput(
    url: str,
    hooks_root: Path,
    *,
    isolation: str,
    workers: int,
    n: int,
    batch: bool,
    pack: int | None = None,
    noop: bool = False,
    code: Path | None = None,
) -> float:
    ns = f"bench-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(url)
    settings = Settings(redis_url=url, namespace=ns)
    record_key = f"{keys.namespace_pattern(ns).rstrip('*')}record"
    hooks = hooks_root / ns
    folder = write_python_hook(hooks, "telemetry", "record", batch=(500, 100) if batch else None)
    runs = lambda: client.hlen(record_key)  # noqa: E731
    if noop:
        (folder / "record_handler.py").write_text(NOOP_HANDLER)
        runs = LoggedRuns(client, keys.Keys.for_namespace(ns).decisions)
    env = worker_env(url, ns, record_key)
    if pack is not None:
        env["HOOKBUS_RQ__PACK_MAX_EVENTS"] = str(pack)
    if code is not None:  # the workers run another revision's hookbus
        env["PYTHONPATH"] = str(code)
    events = [sample_event(i) for i in range(n)]
    try:
        with processes() as procs:
            procs.append(spawn_worker("fanout", hooks, env))
            for _ in range(workers):
                procs.append(spawn_worker("rq", hooks, env, "--isolation", isolation))
            _warm_up(client, settings, lambda: runs() >= 1)
            time.sleep(0.5)  # let the warm-up events drain
            start_runs = runs()
            started = time.perf_counter()
            for start in range(0, n, 1000):
                eventlog.publish_many(client, settings, events[start : start + 1000])
            wait_for(lambda: runs() >= start_runs + n, 300, f"{n} runs")
            elapsed = time.perf_counter() - started
        return n / elapsed
    finally:
        delete_namespace(client, ns)


def bench_isolated(url: str, rounds: int, scale: float) -> None:
    """Packs against one job per event on 2 RQ workers (``none``), alternating, R rounds."""
    import os

    counts = {1: int(1000 * scale), None: int(20_000 * scale)}
    rates: dict[tuple[bool, int | None], list[float]] = {}
    print(f"isolated one-event-at-a-time hook, 2 RQ workers (none), {rounds} rounds")
    print(f"   load average before: {os.getloadavg()[0]:.1f}")
    with TemporaryDirectory() as tmp:
        for round_no in range(rounds):
            for noop in (False, True):
                for pack in (1, None):
                    rate = bench_throughput(
                        url,
                        Path(tmp),
                        isolation="none",
                        workers=2,
                        n=counts[pack],
                        batch=False,
                        pack=pack,
                        noop=noop,
                    )
                    rates.setdefault((noop, pack), []).append(rate)
                    print(
                        f"   round {round_no + 1} {'no-op' if noop else 'recording':9s} "
                        f"{'job/event' if pack == 1 else 'packs':9s}: {rate:8.0f} events/s"
                        f"  ({counts[pack]} events)"
                    )
    print(f"   load average after: {os.getloadavg()[0]:.1f}")
    for noop in (False, True):
        single = statistics.median(rates[(noop, 1)])
        packed = statistics.median(rates[(noop, None)])
        print(
            f"   median, {'no-op' if noop else 'recording':9s} hook: job/event {single:7.0f}, "
            f"packs {packed:7.0f} events/s ({packed / single:.1f}x; goal >= 5,000)"
        )


def bench_against(url: str, rounds: int, scale: float, ref: str) -> None:
    """Packs of this tree against packs of git revision ``ref``, alternating, R rounds."""
    import os
    import subprocess

    n = int(20_000 * scale)
    rates: dict[tuple[bool, str], list[float]] = {}
    print(f"packs, 2 RQ workers (none), {n} events: this tree against {ref}, {rounds} rounds")
    print(f"   load average before: {os.getloadavg()[0]:.1f}")
    root = Path(__file__).resolve().parent.parent
    with TemporaryDirectory() as tmp:
        base = Path(tmp) / "baseline"
        base.mkdir()
        archive = subprocess.run(["git", "archive", ref], cwd=root, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
        for round_no in range(rounds):
            for noop in (False, True):
                for name, code in ((ref, base), ("this tree", None)):
                    rate = bench_throughput(
                        url, Path(tmp), isolation="none", workers=2, n=n, batch=False,
                        noop=noop, code=code,
                    )  # fmt: skip
                    rates.setdefault((noop, name), []).append(rate)
                    print(
                        f"   round {round_no + 1} {'no-op' if noop else 'recording':9s} "
                        f"{name:12s}: {rate:8.0f} events/s"
                    )
    print(f"   load average after: {os.getloadavg()[0]:.1f}")
    for noop in (False, True):
        old = statistics.median(rates[(noop, ref)])
        new = statistics.median(rates[(noop, "this tree")])
        print(
            f"   median, {'no-op' if noop else 'recording':9s} hook: {ref} {old:7.0f}, "
            f"this tree {new:7.0f} events/s (ratio {new / old:.2f})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--quick", action="store_true", help="smaller runs")
    parser.add_argument("--isolated", action="store_true", help="only the packs comparison")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of --isolated")
    parser.add_argument("--baseline", help="with --isolated: compare packs against this git ref")
    args = parser.parse_args()
    url = args.redis_url
    if args.isolated and args.baseline:
        bench_against(url, args.rounds, 0.3 if args.quick else 1.0, args.baseline)
        return
    if args.isolated:
        bench_isolated(url, args.rounds, 0.3 if args.quick else 1.0)
        return
    ns = f"bench-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(url, protocol=2)
    settings = Settings(redis_url=url, namespace=ns)
    scale = 0.3 if args.quick else 1.0
    try:
        bench_publish(client, settings, int(3000 * scale))
        bench_publish_many(client, settings, int(20_000 * scale))
    finally:
        delete_namespace(client, ns)
    with TemporaryDirectory() as tmp:
        root = Path(tmp)
        bench_end_to_end(url, root, int(300 * scale))
        print("4. processed events/s, each event run alone (publish_many of all, then drain)")
        print("   one RQ job per event (rq.pack_max_events = 1) against packs (default 200)")
        for isolation, single, packed in (
            ("fork", int(300 * scale), int(6000 * scale)),
            ("none", int(1500 * scale), int(20_000 * scale)),
        ):
            for workers in (1, 2):
                for pack, count in ((1, single), (None, packed)):
                    rate = bench_throughput(
                        url,
                        root,
                        isolation=isolation,
                        workers=workers,
                        n=count,
                        batch=False,
                        pack=pack,
                    )
                    label = "job/event" if pack == 1 else "packs"
                    print(
                        f"   {isolation:4s} x{workers} workers, {label:9s}: {rate:8.0f} events/s"
                        f"  ({count} events)"
                    )
        print("5. batching telemetry hook (max_events 500, max_wait_ms 100), 2 RQ workers (none)")
        n = int(50_000 * scale)
        rate = bench_throughput(url, root, isolation="none", workers=2, n=n, batch=True)
        print(f"   {rate:8.0f} events/s  ({n} events; goal >= 5,000)")


if __name__ == "__main__":
    main()
