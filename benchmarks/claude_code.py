"""Claude Code adapter benchmark: what one hook event costs Claude Code, every way it can call.

Run: ``python benchmarks/claude_code.py [--redis-url URL] [--runs N] [--posts N]``

In one run, on one Redis, one chain worker (one in-process guard, so the chain costs
microseconds and the figures are the transport's):

(a) bare ``python -c pass`` (the floor of any process per event);
(b) a hand-written python command hook (reads the JSON, prints a deny or nothing), what a
    team writes without hookbus;
(c) ``hookbus claude-code hook`` on an observe-only event (PostToolUse: one XADD);
(d) ``hookbus claude-code hook`` on a blocking event (PreToolUse: a request to the fleet);
(e) a keep-alive ``POST /v1/hooks/claude-code`` to ``hookbus gateway`` (PreToolUse);
(f) ``HookBus.request`` in-process for the same event (what the gateway is compared with).

Processes are measured as wall time and as CPU time (user + system: steadier on a shared
machine), interleaved so drift hits every row. Goals: (c) <= 1.5x (a); (e) - (f) <= 1 ms p50.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import redis

from hookbus import HookBus
from hookbus.bus.keys import namespace_pattern, workers
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "claude_code"

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

def guard(event):
    if "rm -rf /" in event.payload.get("tool_input", {}).get("command", ""):
        return HookResult(outcome="deny", reason="destructive command")
    return None

registry.register("guard", guard, events=["PreToolUse"])
stop = threading.Event()
with graceful_signals(stop):
    run_chain_worker(settings, registry=registry, stop_event=stop)
"""

HAND_WRITTEN_HOOK = r"""
import json, sys
event = json.load(sys.stdin)
if "rm -rf /" in event.get("tool_input", {}).get("command", ""):
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "deny", "permissionDecisionReason": "destructive command"}}))
"""


def _cpu_ms() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (usage.ru_utime + usage.ru_stime) * 1000


def _spawn(command: list[str], stdin: bytes, env: dict[str, str]) -> tuple[float, float]:
    cpu = _cpu_ms()
    start = time.perf_counter()
    done = subprocess.run(command, input=stdin, capture_output=True, env=env)
    wall = (time.perf_counter() - start) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{command[:3]} failed: {done.stderr.decode()[-500:]}")
    return wall, _cpu_ms() - cpu


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _stats(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    return f"{statistics.median(values):8.2f} ({p90:7.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--redis-url", default=os.environ.get("HOOKBUS_REDIS_URL", "redis://127.0.0.1:6379/0")
    )
    parser.add_argument("--runs", type=int, default=30, help="process starts per row")
    parser.add_argument("--posts", type=int, default=500, help="gateway / in-process calls")
    args = parser.parse_args()

    ns = f"bench-cc-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(args.redis_url, protocol=2)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(HOOKBUS_REDIS_URL=args.redis_url, HOOKBUS_NAMESPACE=ns, PYTHONPATH=str(ROOT))
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER_CODE, args.redis_url, ns],
        env=env,
        stderr=subprocess.DEVNULL,
    )
    port = _free_port()
    gateway = subprocess.Popen(
        [sys.executable, "-m", "hookbus", "gateway", "--port", str(port)],
        env=env,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while client.hlen(workers(ns)) == 0 or not _listening(port):
            if time.monotonic() > deadline:
                raise SystemExit("the worker or the gateway did not start")
            time.sleep(0.05)

        script = Path(sys.executable).parent / "hookbus"
        hookbus = [str(script)] if script.is_file() else [sys.executable, "-m", "hookbus"]
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
            fh.write(HAND_WRITTEN_HOOK)
        post_tool = (FIXTURES / "PostToolUse.json").read_bytes()
        pre_tool = (FIXTURES / "PreToolUse.json").read_bytes()
        rows = {
            "(a) python -c pass": ([sys.executable, "-c", "pass"], pre_tool),
            "(b) hand-written python hook": ([sys.executable, fh.name], pre_tool),
            "(c) claude-code hook, PostToolUse": ([*hookbus, "claude-code", "hook"], post_tool),
            "(d) claude-code hook, PreToolUse": ([*hookbus, "claude-code", "hook"], pre_tool),
        }
        for command, stdin in rows.values():  # warm: bytecode, page cache
            _spawn(command, stdin, env)
        walls: dict[str, list[float]] = {name: [] for name in rows}
        cpus: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(args.runs):
            for name, (command, stdin) in rows.items():
                wall, cpu = _spawn(command, stdin, env)
                walls[name].append(wall)
                cpus[name].append(cpu)
        os.unlink(fh.name)

        event = json.loads(pre_tool)
        conn = http.client.HTTPConnection("127.0.0.1", port)
        body = json.dumps(event).encode()
        gateway_ms = []
        for i in range(args.posts + 20):
            start = time.perf_counter()
            conn.request(
                "POST", "/v1/hooks/claude-code", body, {"Content-Type": "application/json"}
            )
            response = conn.getresponse()
            response.read()
            if i >= 20:
                gateway_ms.append((time.perf_counter() - start) * 1000)
        conn.close()

        settings = Settings(redis_url=args.redis_url, namespace=ns)
        inproc_ms = []
        with HookBus(settings) as bus:
            for i in range(args.posts + 20):
                bus_event = Event(
                    kind="PreToolUse",
                    session_id=event["session_id"],
                    payload={"tool_name": "Bash", "tool_input": event["tool_input"]},
                )
                start = time.perf_counter()
                bus.request(bus_event)
                if i >= 20:
                    inproc_ms.append((time.perf_counter() - start) * 1000)
    finally:
        gateway.terminate()
        worker.terminate()
        gateway.wait(10)
        worker.wait(10)
        keys = list(client.scan_iter(match=namespace_pattern(ns), count=1000))
        if keys:
            client.delete(*keys)
        client.close()

    bare_wall = statistics.median(walls["(a) python -c pass"])
    bare_cpu = statistics.median(cpus["(a) python -c pass"])
    print(f"hookbus claude-code benchmark: {args.runs} process starts per row, {args.posts} calls")
    head = f"{'wall p50 (p90) ms':>20s} {'x bare':>7s} {'cpu p50 (p90) ms':>20s} {'x bare':>7s}"
    print(f"{'':38s} {head}")
    for name in rows:
        wall = statistics.median(walls[name])
        cpu = statistics.median(cpus[name])
        print(
            f"{name:38s} {_stats(walls[name]):>20s} {wall / bare_wall:7.2f} "
            f"{_stats(cpus[name]):>20s} {cpu / bare_cpu:7.2f}"
        )
    print(f"{'(e) gateway keep-alive POST, PreToolUse':38s} {_stats(gateway_ms):>20s}")
    print(f"{'(f) HookBus.request in-process':38s} {_stats(inproc_ms):>20s}")
    overhead = statistics.median(gateway_ms) - statistics.median(inproc_ms)
    print(f"gateway over in-process, p50: {overhead:+.2f} ms (goal <= 1 ms)")
    ratio = statistics.median(cpus["(c) claude-code hook, PostToolUse"]) / bare_cpu
    print(f"observe-only hook vs bare python, CPU p50: x{ratio:.2f} (goal <= 1.5)")


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


if __name__ == "__main__":
    main()
