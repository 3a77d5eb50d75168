"""How fast a reload reaches the fleet, and whether any request notices.

For N = 1, 2, 4 chain workers (real ``hookbus worker --role chain`` processes following
bundles) a producer thread sends blocking PreToolUse requests without pause while this
script pushes 20 bundles (each a different hook ``r<i>`` adding context ``ran:r<i>``).
After each push it polls the heartbeat hash (every 1 ms) until every live worker acks the
new version. It prints, per N:

* push: time ``push_bundle`` takes (pack, validate, audit, store, stamp, publish);
* last ack: time from ``push_bundle`` returning to the last worker's ack (p50 / max);
* requests answered during the reloads, errors (degraded or raised) and mixed-version
  decisions (context not the one of the decision's ``bundle_version``, or a trace with
  hooks of two sets).

Goals (issue 6): last ack <= 100 ms p50; zero errors and zero mixed-version decisions.
The host is shared (2 cores) and drifts about ±25 %: compare within one run.

Run: ``/work/.venv/bin/python benchmarks/reload.py [--reloads 20] [--workers 1,2,4]``
(``HOOKBUS_REDIS_URL`` or redis://127.0.0.1:6379/0; a fresh namespace per N, deleted after).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import redis

from hookbus import HookBus
from hookbus.authoring import release
from hookbus.bus import keys
from hookbus.bus.connection import connect
from hookbus.bus.settings.loader import Settings, WorkerSettings
from hookbus.bus.wire import Decision, Event
from hookbus.workers.fleet.heartbeat import list_workers
from hookbus.workers.reload.acks import wait_for_acks

ROOT = Path(__file__).resolve().parents[1]
#: Deadline of each benchmark request, in ms (generous: we count errors, not latency).
REQUEST_DEADLINE_MS = 1_000
#: Pause between reloads, in seconds, so requests run on each version for a while.
PAUSE_BETWEEN_RELOADS_S = 0.1
#: How long workers may take to start, in seconds.
START_TIMEOUT_S = 60.0


def write_hook(root: Path, name: str) -> None:
    if root.exists():
        shutil.rmtree(root)
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "HOOK.toml").write_text(
        f'name = "{name}"\nevents = ["PreToolUse"]\n'
        f'[action.prompt_inject]\ncontent = "ran:{name}"\n'
    )


@dataclass
class Run:
    workers: int
    push_ms: list[float] = field(default_factory=list)
    last_ack_ms: list[float] = field(default_factory=list)
    not_acked: int = 0
    answered: int = 0
    errors: int = 0
    mixed: int = 0
    error_samples: list[str] = field(default_factory=list)


def start_workers(n: int, settings: Settings, client: redis.Redis) -> list[subprocess.Popen[bytes]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env.update(
        HOOKBUS_REDIS_URL=settings.effective_redis_url,
        HOOKBUS_NAMESPACE=settings.namespace,
        HOOKBUS_LOG_LEVEL="ERROR",
        HOOKBUS_RELOAD__DATA_DIR=str(
            Path(tempfile.gettempdir()) / f"hookbus-bench-{settings.namespace}"
        ),
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "hookbus", "worker", "--role", "chain"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
        )
        for _ in range(n)
    ]
    k = keys.Keys.for_namespace(settings.namespace)
    deadline = time.monotonic() + START_TIMEOUT_S
    while len(list_workers(client, k)) < n:
        if time.monotonic() > deadline:
            raise SystemExit(f"{n} workers did not start in {START_TIMEOUT_S}s")
        time.sleep(0.05)
    return procs


def stop_workers(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def delete_namespace(client: redis.Redis, ns: str) -> None:
    for key in list(client.scan_iter(match=keys.namespace_pattern(ns), count=1000)):
        client.delete(key)


def check(decision: Decision, expected: dict[str, str]) -> str | None:
    """Why a decision is wrong, or None."""
    if decision.degraded:
        return f"degraded: {decision.reason}"
    name = expected.get(decision.bundle_version or "")
    if name is None:
        return f"unknown bundle version {decision.bundle_version}"
    if [c for c in decision.context if c.startswith("ran:")] != [f"ran:{name}"]:
        return f"mixed: version {decision.bundle_version} but context {decision.context}"
    if [r.hook_id for r in decision.trace] != [name]:
        return f"mixed: version {decision.bundle_version} but trace {decision.trace}"
    return None


def run_one(n: int, reloads: int, url: str) -> Run:
    ns = f"bench-reload-{uuid.uuid4().hex[:8]}"
    settings = Settings(
        redis_url=url, namespace=ns, workers=WorkerSettings(heartbeat_interval_ms=1_000)
    )
    client = connect(url)
    hooks = Path(tempfile.mkdtemp(prefix="hookbus-bench-hooks-")) / "hooks"
    expected: dict[str, str] = {}
    write_hook(hooks, "r-initial")
    expected[release.release_folder(client, settings, hooks).version] = "r-initial"
    procs = start_workers(n, settings, client)
    result = Run(workers=n)
    decisions: list[Decision] = []
    stop = threading.Event()

    def produce() -> None:
        with HookBus(settings) as bus:
            while not stop.is_set():
                try:
                    decisions.append(
                        bus.request(Event(kind="PreToolUse"), deadline_ms=REQUEST_DEADLINE_MS)
                    )
                except Exception as exc:  # counted, never fatal to the benchmark
                    result.errors += 1
                    result.error_samples.append(repr(exc))

    producer = threading.Thread(target=produce, daemon=True)
    try:
        producer.start()
        time.sleep(0.5)
        decisions.clear()
        for i in range(reloads):
            name = f"r{i}"
            write_hook(hooks, name)
            t0 = time.perf_counter()
            pushed = release.release_folder(client, settings, hooks)
            result.push_ms.append((time.perf_counter() - t0) * 1000)
            expected[pushed.version] = name
            report = wait_for_acks(
                client, settings, pushed.version, timeout_s=5, poll_interval_s=0.001
            )
            if not report.ok or report.last_ack_ms is None:
                result.not_acked += 1
            else:
                result.last_ack_ms.append(report.last_ack_ms)
            time.sleep(PAUSE_BETWEEN_RELOADS_S)
    finally:
        stop.set()
        producer.join(timeout=10)
        stop_workers(procs)
        delete_namespace(client, ns)
        shutil.rmtree(hooks.parent, ignore_errors=True)
        shutil.rmtree(Path(tempfile.gettempdir()) / f"hookbus-bench-{ns}", ignore_errors=True)
    result.answered = len(decisions)
    for d in decisions:
        why = check(d, expected)
        if why is None:
            continue
        if why.startswith("mixed"):
            result.mixed += 1
        else:
            result.errors += 1
        if len(result.error_samples) < 5:
            result.error_samples.append(why)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reloads", type=int, default=20)
    parser.add_argument("--workers", default="1,2,4", help="comma-separated fleet sizes")
    args = parser.parse_args()
    url = os.environ.get("HOOKBUS_REDIS_URL", "redis://127.0.0.1:6379/0")
    print(f"{args.reloads} reloads per fleet size, continuous blocking requests, {url}")
    header = (
        f"{'N':>2}  {'push p50':>9}  {'last ack p50':>12}  {'max':>8}  {'not acked':>9}  "
        f"{'answered':>8}  {'errors':>6}  {'mixed':>5}"
    )
    print(header)
    for n in (int(x) for x in args.workers.split(",")):
        r = run_one(n, args.reloads, url)
        p50 = statistics.median(r.last_ack_ms) if r.last_ack_ms else float("nan")
        mx = max(r.last_ack_ms) if r.last_ack_ms else float("nan")
        print(
            f"{n:>2}  {statistics.median(r.push_ms):>7.1f}ms  {p50:>10.1f}ms  {mx:>6.1f}ms  "
            f"{r.not_acked:>9}  {r.answered:>8}  {r.errors:>6}  {r.mixed:>5}"
        )
        for sample in r.error_samples:
            print(f"    {sample}")


if __name__ == "__main__":
    main()
