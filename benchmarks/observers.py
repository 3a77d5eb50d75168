"""What a slow observer of requests costs the agent: inline advisory against an RQ job.

Run: ``python benchmarks/observers.py [--requests N] [--sleep-ms MS]``

Starts a private redis-server and, side by side in one run, two fleets (chain worker,
fan-out role, RQ worker) on two namespaces of it, each with one ``blocking = false`` hook on
PromptSubmit that sleeps ``--sleep-ms``:

(a) marked ``inline = true``: it runs inside the chain of every request, as advisory hooks
    did before observers existed;
(b) a plain observer: it runs as an RQ job after the answer (fed from the decision log).

Prints each request's p50 / max latency and how many answers came back degraded, then waits
for (b)'s observer to have run once per request (exactly once: the count is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from hookbus import HookBus  # noqa: E402
from hookbus.bus import keys  # noqa: E402
from hookbus.bus.settings.loader import Settings  # noqa: E402
from hookbus.bus.wire import Event  # noqa: E402
from tests.cluster_fixture import local_server  # noqa: E402

HANDLER = """
import os, time, redis
def slow(event):
    time.sleep({sleep_s})
    redis.Redis.from_url(os.environ["HOOKBUS_REDIS_URL"]).hincrby("observed", event.id, 1)
"""


def _hooks(root: Path, inline: bool, sleep_ms: int) -> Path:
    folder = root / ("inline" if inline else "observer") / "slow"
    folder.mkdir(parents=True)
    (folder / "handler.py").write_text(HANDLER.format(sleep_s=sleep_ms / 1000))
    (folder / "HOOK.toml").write_text(
        'name = "slow"\nevents = ["PromptSubmit"]\nblocking = false\n'
        + ("inline = true\n" if inline else "")
        + '[action.python]\nentrypoint = "handler:slow"\ntimeout_secs = 30\n'
    )
    return folder.parent


def _fleet(url: str, ns: str, hooks: Path) -> list[subprocess.Popen[bytes]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env.update(HOOKBUS_REDIS_URL=url, HOOKBUS_NAMESPACE=ns, PYTHONPATH=str(ROOT))
    return [
        subprocess.Popen(
            [sys.executable, "-m", "hookbus", "worker", "--role", role, "--hooks-dir", str(hooks)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for role in ("chain", "fanout", "rq")
    ]


def _wait_for_roles(client: redis.Redis, ns: str, timeout_s: float = 90.0) -> None:
    """Until a chain worker and a fan-out role heartbeat in ``ns``."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        beats = client.hgetall(keys.workers(ns)).values()  # type: ignore[union-attr]
        if {json.loads(b).get("role") for b in beats} >= {"chain", "fanout"}:
            return
        time.sleep(0.2)
    raise SystemExit(f"the fleet of {ns} did not start within {timeout_s:.0f} s")


def _measure(settings: Settings, requests: int, deadline_ms: int) -> tuple[list[float], int]:
    latencies, degraded = [], 0
    with HookBus(settings) as bus:
        for i in range(requests):
            event = Event(kind="PromptSubmit", session_id=f"s{i}", payload={"prompt": "hi"})
            started = time.perf_counter()
            decision = bus.request(event, deadline_ms=deadline_ms)
            latencies.append((time.perf_counter() - started) * 1000)
            degraded += decision.degraded
    return latencies, degraded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--sleep-ms", type=int, default=2_000)
    args = parser.parse_args()
    deadline_ms = args.sleep_ms + 1_000
    with local_server() as server, tempfile.TemporaryDirectory() as tmp:
        client = server.client()
        runs = {}
        for inline in (True, False):
            ns = f"obs{uuid.uuid4().hex[:8]}"
            procs = _fleet(server.url, ns, _hooks(Path(tmp), inline, args.sleep_ms))
            try:
                _wait_for_roles(client, ns)
                settings = Settings(redis_url=server.url, namespace=ns)
                runs[inline] = _measure(settings, args.requests, deadline_ms)
                if not inline:
                    end = time.monotonic() + args.requests * args.sleep_ms / 1000 + 30
                    while client.hlen("observed") < args.requests and time.monotonic() < end:
                        time.sleep(0.2)
            finally:
                for proc in procs:
                    proc.terminate()
                for proc in procs:
                    proc.wait(30)
            if inline:
                client.delete("observed")  # (a) ran it in the chain: count (b)'s runs only
        counts = [int(v) for v in client.hvals("observed")]
        client.close()
    print(
        f"PromptSubmit requests with a {args.sleep_ms} ms blocking = false hook, deadline "
        f"{deadline_ms} ms, {args.requests} requests each"
    )
    for inline, label in (
        (True, "(a) inline = true (in the chain)"),
        (False, "(b) observer (RQ job)"),
    ):
        latencies, degraded = runs[inline]
        print(
            f"{label:36} p50 {statistics.median(latencies):9.1f} ms   "
            f"max {max(latencies):9.1f} ms   degraded {degraded}/{len(latencies)}"
        )
    print(
        f"(b)'s observer ran {len(counts)} of {args.requests} requests, each "
        f"{sorted(set(counts)) or '-'} time(s)"
    )


if __name__ == "__main__":
    main()
