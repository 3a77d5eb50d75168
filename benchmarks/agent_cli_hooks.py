"""What one hook event costs each agent CLI: ``hookbus <cli> hook`` per row of the adapter table.

Run: ``python benchmarks/agent_cli_hooks.py [--redis-url URL] [--runs N] [--clis a,b]``

As ``benchmarks/claude_code.py`` does for Claude Code, and with its wheel venv and chain
worker (one in-process guard, so the figures are the transport's): a wheel of this tree is
installed in a fresh venv, and each CLI's own captured inputs (``tests/fixtures/<cli>/``)
are fed to ``hookbus <cli> hook`` of that venv, a process per event, as the CLI starts it:

* the after-tool event (observe-only: one XADD) and the guard event (a request to the
  fleet, answered by the chain worker), for every CLI;
* for Cline, the hook file its installer writes too (``/bin/sh`` running ``hookbus cline
  hook``, as Cline starts it);
* bare ``python -c pass`` of the venv, the floor of any process per event.

Rows run interleaved, hyperfine-style (warm-up, then ``--runs`` rounds of every row), as wall
time and CPU time (user + system, steadier on a shared machine): medians, p90, and each
over the bare start of the same venv.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import redis
from claude_code import WORKER_CODE, _spawn, _stats, build_venv

from hookbus.bus.keys import namespace_pattern, workers
from hookbus.harnesses.install import cline as cline_install

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
#: CLI -> (fixture folder, its guard event, its after-tool event).
EVENTS = {
    "claude-code": ("claude_code", "PreToolUse", "PostToolUse"),
    "gemini-cli": ("gemini_cli", "BeforeTool", "AfterTool"),
    "codex": ("codex", "PreToolUse", "PostToolUse"),
    "copilot": ("copilot", "PreToolUse", "PostToolUse"),
    "qwen-code": ("qwen_code", "PreToolUse", "PostToolUse"),
    "cline": ("cline", "PreToolUse", "PostToolUse"),
}
BARE = "(a) python -c pass"


def _rows(bindir: Path, clis: list[str]) -> dict[str, tuple[list[str], bytes]]:
    """Every row: its command line and the stdin it gets."""
    python, hookbus = str(bindir / "python"), str(bindir / "hookbus")
    folder, guard, _ = EVENTS["claude-code"]
    rows = {BARE: ([python, "-c", "pass"], (FIXTURES / folder / f"{guard}.json").read_bytes())}
    for cli in clis:
        folder, guard, after = EVENTS[cli]
        for event in (after, guard):
            stdin = (FIXTURES / folder / f"{event}.json").read_bytes()
            rows[f"{cli} hook, {event}"] = ([hookbus, cli, "hook", "--timeout", "10"], stdin)
    if "cline" in clis:  # Cline runs the installer's hook file: a /bin/sh start in front
        folder, guard, after = EVENTS["cline"]
        hooks = bindir.parent.parent / "cline-hooks"
        cline_install.install(hooks, command=hookbus, events=[after, guard])
        for event in (after, guard):
            stdin = (FIXTURES / folder / f"{event}.json").read_bytes()
            rows[f"cline hook file (sh), {event}"] = (["/bin/sh", str(hooks / event)], stdin)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--redis-url", default=os.environ.get("HOOKBUS_REDIS_URL", "redis://127.0.0.1:6379/0")
    )
    parser.add_argument("--runs", type=int, default=30, help="process starts per row")
    parser.add_argument("--clis", default=",".join(EVENTS), help="comma-separated CLIs")
    args = parser.parse_args()
    clis = [c for c in args.clis.split(",") if c]
    unknown = [c for c in clis if c not in EVENTS]
    if unknown:
        raise SystemExit(f"unknown CLI(s) {', '.join(unknown)}: choose from {', '.join(EVENTS)}")

    scratch = Path(tempfile.mkdtemp(prefix="hookbus-bench-clis-"))
    print("building the wheel venv...", file=sys.stderr)
    bindir = build_venv(ROOT, scratch / "tree")
    ns = f"bench-clis-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(args.redis_url, protocol=2)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(HOOKBUS_REDIS_URL=args.redis_url, HOOKBUS_NAMESPACE=ns, PYTHONPATH=str(ROOT))
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER_CODE, args.redis_url, ns], env=env, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 20
        while client.hlen(workers(ns)) == 0:
            if time.monotonic() > deadline:
                raise SystemExit("the chain worker did not start")
            time.sleep(0.05)
        wheel_env = {k: v for k, v in env.items() if k != "PYTHONPATH"}  # run as installed
        rows = _rows(bindir, clis)
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
    finally:
        worker.terminate()
        worker.wait(10)
        shutil.rmtree(scratch, ignore_errors=True)
        found = list(client.scan_iter(match=namespace_pattern(ns), count=1000))
        if found:
            client.delete(*found)
        client.close()

    print(f"hookbus <cli> hook per event: {args.runs} process starts per row, a wheel venv")
    head = f"{'wall p50 (p90) ms':>20s} {'x bare':>7s} {'cpu p50 (p90) ms':>20s} {'x bare':>7s}"
    width = max(len(name) for name in rows) + 1
    print(f"{'':{width}s} {head}")
    bare_wall, bare_cpu = statistics.median(walls[BARE]), statistics.median(cpus[BARE])
    for name in rows:
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        print(
            f"{name:{width}s} {_stats(walls[name]):>20s} {wall / bare_wall:7.2f} "
            f"{_stats(cpus[name]):>20s} {cpu / bare_cpu:7.2f}"
        )


if __name__ == "__main__":
    main()
