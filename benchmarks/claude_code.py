"""Claude Code adapter benchmark: what one hook event costs Claude Code, every way it can call.

Run: ``python benchmarks/claude_code.py [--redis-url URL] [--runs N] [--posts N]
[--baseline REF]``

The per-event rows run as a user installs hookbus: the benchmark builds a wheel of this
tree, makes a fresh venv and installs it there (an editable install's import finder adds
about 9 ms to every start of its venv, the bare interpreter's included, which hides what
the hook itself costs). ``--baseline main`` builds a second wheel from that git ref into a
venv of its own, and measures it in the same run, interleaved, so the two trees are
compared on the same machine at the same moment.

In one run, on one Redis, one chain worker (one in-process guard, so the chain costs
microseconds and the figures are the transport's), for each wheel venv:

(a) bare ``python -c pass`` of that venv (the floor of any process per event);
(b) a hand-written python command hook (reads the JSON, prints a deny or nothing), what a
    team writes without hookbus;
(c) ``hookbus claude-code hook`` on an observe-only event (PostToolUse: one XADD);
(d) ``hookbus claude-code hook`` on a blocking event (PreToolUse: a request to the fleet);

and once, from the interpreter running the benchmark:

(e) a keep-alive ``POST /v1/hooks/claude-code`` to ``hookbus gateway`` (PreToolUse);
(f) ``HookBus.request`` in-process for the same event (what the gateway is compared with).

Processes are measured as wall time and as CPU time (user + system: steadier on a shared
machine), hyperfine-style: warm-up runs, then ``--runs`` runs of every row interleaved so
that drift hits every row; medians and p90. Goals: (c) <= 1.5x (a) of the same venv;
(e) - (f) <= 1 ms p50.
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tarfile
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


def _spawn(
    command: list[str], stdin: bytes, env: dict[str, str], cwd: Path | None = None
) -> tuple[float, float]:
    cpu = _cpu_ms()
    start = time.perf_counter()
    done = subprocess.run(command, input=stdin, capture_output=True, env=env, cwd=cwd)
    wall = (time.perf_counter() - start) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{command[:3]} failed: {done.stderr.decode()[-500:]}")
    return wall, _cpu_ms() - cpu


def build_venv(source: Path, folder: Path) -> Path:
    """A wheel of ``source`` installed (with its dependencies) in a fresh venv under
    ``folder``; that venv's ``bin`` folder."""
    wheels = folder / "wheel"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(source)],
        check=True,
        capture_output=True,
    )
    [wheel] = wheels.glob("hookbus-*.whl")
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
        check=True,
        capture_output=True,
    )
    return venv / "bin"


def export_ref(ref: str, folder: Path) -> Path:
    """The tree of git ``ref`` of this repository, written out under ``folder``."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", ref],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    return folder


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
    parser.add_argument(
        "--baseline", metavar="REF", help="also measure a wheel of this git ref (e.g. main)"
    )
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="hookbus-bench-"))
    print("building the wheel venvs...", file=sys.stderr)
    venvs = {"tree": build_venv(ROOT, scratch / "tree")}
    if args.baseline:
        source = export_ref(args.baseline, scratch / "ref-src")
        venvs[args.baseline] = build_venv(source, scratch / "ref")

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

        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
            fh.write(HAND_WRITTEN_HOOK)
        post_tool = (FIXTURES / "PostToolUse.json").read_bytes()
        pre_tool = (FIXTURES / "PreToolUse.json").read_bytes()
        # the wheel venvs run as installed: no PYTHONPATH into this tree
        wheel_env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
        rows: dict[str, tuple[list[str], bytes]] = {}
        for label, bindir in venvs.items():
            python, hook = str(bindir / "python"), [str(bindir / "hookbus"), "claude-code", "hook"]
            rows[f"{label}: (a) python -c pass"] = ([python, "-c", "pass"], pre_tool)
            rows[f"{label}: (b) hand-written python hook"] = ([python, fh.name], pre_tool)
            rows[f"{label}: (c) claude-code hook, PostToolUse"] = (hook, post_tool)
            rows[f"{label}: (d) claude-code hook, PreToolUse"] = (hook, pre_tool)
        for _ in range(3):  # warm: bytecode, page cache
            for command, stdin in rows.values():
                _spawn(command, stdin, wheel_env, cwd=scratch)
        walls: dict[str, list[float]] = {name: [] for name in rows}
        cpus: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(args.runs):
            for name, (command, stdin) in rows.items():
                wall, cpu = _spawn(command, stdin, wheel_env, cwd=scratch)
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
        shutil.rmtree(scratch, ignore_errors=True)
        keys = list(client.scan_iter(match=namespace_pattern(ns), count=1000))
        if keys:
            client.delete(*keys)
        client.close()

    print(f"hookbus claude-code benchmark: {args.runs} process starts per row, {args.posts} calls")
    print("per-event rows: wheel installs in fresh venvs; x bare = over that venv's (a)")
    head = f"{'wall p50 (p90) ms':>20s} {'x bare':>7s} {'cpu p50 (p90) ms':>20s} {'x bare':>7s}"
    width = max(len(name) for name in rows) + 1
    print(f"{'':{width}s} {head}")
    for name in rows:
        label = name.partition(":")[0]
        bare_wall = statistics.median(walls[f"{label}: (a) python -c pass"])
        bare_cpu = statistics.median(cpus[f"{label}: (a) python -c pass"])
        wall = statistics.median(walls[name])
        cpu = statistics.median(cpus[name])
        print(
            f"{name:{width}s} {_stats(walls[name]):>20s} {wall / bare_wall:7.2f} "
            f"{_stats(cpus[name]):>20s} {cpu / bare_cpu:7.2f}"
        )
    print(f"{'(e) gateway keep-alive POST, PreToolUse':{width}s} {_stats(gateway_ms):>20s}")
    print(f"{'(f) HookBus.request in-process':{width}s} {_stats(inproc_ms):>20s}")
    overhead = statistics.median(gateway_ms) - statistics.median(inproc_ms)
    print(f"gateway over in-process, p50: {overhead:+.2f} ms (goal <= 1 ms)")
    for label in venvs:
        bare = f"{label}: (a) python -c pass"
        hook = f"{label}: (c) claude-code hook, PostToolUse"
        wall = statistics.median(walls[hook]) / statistics.median(walls[bare])
        cpu = statistics.median(cpus[hook]) / statistics.median(cpus[bare])
        print(
            f"{label}: observe-only hook vs bare python of the same venv, p50: "
            f"wall x{wall:.2f}, CPU x{cpu:.2f} (goal <= 1.5)"
        )


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


if __name__ == "__main__":
    main()
