"""Agent-CLI hook benchmark: what one hook event costs each row of the adapter table.

Run: ``python benchmarks/agent_cli_hooks.py [--redis-url URL] [--runs N] [--calls N]
[--opencode PATH] [--kilo PATH]``

As :mod:`claude_code` does (its wheel venv, chain worker and statistics are reused), in one
run on one Redis with one chain worker (one in-process guard: the figures are the
transport's), for a wheel of this tree in a fresh venv:

(a) bare ``python -c pass`` of the venv (the floor of any process per event);
(b) ``hookbus <cli> hook`` on each row's after-tool event (observe-only: one XADD) and
    (c) its before-tool event (a request to the fleet), fed the row's captured fixture;
    for Cline also the hook file its installer writes (``/bin/sh`` running ``hookbus cline
    hook``, as Cline starts it);

and, for OpenCode and Kilo CLI, whose guard is an in-process plugin that starts the hook
command itself, timed inside the CLI's own runtime (its executable run as Bun with
``BUN_BE_BUN=1``), ``--calls`` calls each, one after another:

(d) the installed plugin's ``tool.execute.after`` and (e) its ``tool.execute.before``
    (the plugin's JSON, a ``/bin/sh`` and ``hookbus <cli> hook``: what a tool call pays);
(f) the same plugin with its command replaced by the venv's ``python -c pass`` (the floor
    of a plugin that starts a process per event).

The CLIs default to the pinned versions the tests install under ``.test-cache/``; a row
whose binary is missing is left out, and says so. Processes are measured as wall time and
CPU time (user + system), with warm-up runs and every row interleaved; medians and p90.
"""

from __future__ import annotations

import argparse
import json
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
#: adapter row -> (fixture folder, after-tool fixture, before-tool fixture).
ROWS = {
    "claude-code": ("claude_code", "PostToolUse", "PreToolUse"),
    "gemini-cli": ("gemini_cli", "AfterTool", "BeforeTool"),
    "codex": ("codex", "PostToolUse", "PreToolUse"),
    "copilot": ("copilot", "PostToolUse", "PreToolUse"),
    "qwen-code": ("qwen_code", "PostToolUse", "PreToolUse"),
    "cline": ("cline", "PostToolUse", "PreToolUse"),
    "opencode": ("opencode", "tool.execute.after", "tool.execute.before"),
    "kilo": ("kilo", "tool.execute.after", "tool.execute.before"),
}
#: The plugin CLIs' binaries the tests install (tests/integration/agent_clis.py).
CACHED = {
    "opencode": ROOT / ".test-cache/opencode-1.18.33/node_modules/.bin/opencode",
    "kilo": ROOT / ".test-cache/kilo-7.7.7/node_modules/.bin/kilo",
}
#: Times the installed plugin's hooks in the CLI's runtime; prints {hook: [ms, ...]}.
PLUGIN_TIMER = """
(async () => {
  const m = await import(require("url").pathToFileURL(process.env.PLUGIN).href);
  const hooks = await m.HookbusPlugin({});
  const calls = Number(process.env.CALLS);
  const input = {tool: "bash", sessionID: "ses_bench", callID: "call_bench"};
  const out = {};
  for (const hook of ["tool.execute.after", "tool.execute.before"]) {
    out[hook] = [];
    for (let i = 0; i < calls + 3; i++) {
      const args = {command: "ls", description: "list"};
      const output = hook === "tool.execute.after"
        ? {title: "ls", output: "disk.img\\n", metadata: {exit: 0}} : {args};
      const started = performance.now();
      await hooks[hook]({...input, args}, output);
      if (i >= 3) out[hook].push(performance.now() - started);
    }
  }
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(String(e)); process.exit(1); });
"""


def _fixture(cli: str, name: str) -> bytes:
    folder, *_ = ROWS[cli]
    return (FIXTURES / folder / f"{name}.json").read_bytes()


def _plugin_rows(
    cli: str, binary: Path, bindir: Path, env: dict[str, str], scratch: Path, calls: int
) -> dict[str, list[float]]:
    """(d), (e), (f) for one plugin CLI: the plugin installed by the venv's hookbus."""
    plugin = scratch / cli / "plugin" / "hookbus.js"
    path = os.pathsep.join([str(binary.parent), env.get("PATH", "")])
    subprocess.run(
        [str(bindir / "hookbus"), cli, "install", "--settings", str(plugin)],
        env=dict(env, PATH=path),
        check=True,
        capture_output=True,
    )
    floor = plugin.with_name("floor.js")
    text = plugin.read_text()
    command = f"{bindir / 'hookbus'} {cli} hook"
    floor.write_text(
        text.replace(f'"command": "{command}', f'"command": "{bindir / "python"} -c pass #')
    )
    rows: dict[str, list[float]] = {}
    for label, file in (("", plugin), ("floor ", floor)):
        done = subprocess.run(
            [str(binary), "-e", PLUGIN_TIMER],
            env=dict(env, BUN_BE_BUN="1", PLUGIN=str(file), CALLS=str(calls)),
            check=True,
            capture_output=True,
            text=True,
        )
        if not label and "hookbus:" in done.stderr:  # a point that passed without the fleet
            raise SystemExit(f"{cli}: the plugin did not reach the fleet: {done.stderr[-500:]}")
        for hook, values in json.loads(done.stdout.strip().splitlines()[-1]).items():
            rows[f"{cli}: plugin {label}{hook}"] = values
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--redis-url", default=os.environ.get("HOOKBUS_REDIS_URL", "redis://127.0.0.1:6379/0")
    )
    parser.add_argument("--runs", type=int, default=30, help="process starts per row")
    parser.add_argument("--calls", type=int, default=30, help="plugin calls per hook")
    for cli, default in CACHED.items():
        parser.add_argument(f"--{cli}", type=Path, default=default, help=f"the {cli} binary")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="hookbus-bench-"))
    print("building the wheel venv...", file=sys.stderr)
    bindir = build_venv(ROOT, scratch / "tree")
    ns = f"bench-cli-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(args.redis_url, protocol=2)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HOOKBUS_", "PYTHON"))}
    env.update(HOOKBUS_REDIS_URL=args.redis_url, HOOKBUS_NAMESPACE=ns)
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER_CODE, args.redis_url, ns],
        env=dict(env, PYTHONPATH=str(ROOT)),
        stderr=subprocess.DEVNULL,
    )
    plugin_ms: dict[str, list[float]] = {}
    missing: list[str] = []
    try:
        deadline = time.monotonic() + 20
        while client.hlen(workers(ns)) == 0:
            if time.monotonic() > deadline:
                raise SystemExit("the chain worker did not start")
            time.sleep(0.05)
        rows: dict[str, tuple[list[str], bytes]] = {
            "(a) python -c pass": ([str(bindir / "python"), "-c", "pass"], b"{}")
        }
        for cli, (_, post, pre) in ROWS.items():
            hook = [str(bindir / "hookbus"), cli, "hook"]
            rows[f"{cli}: (b) hook, {post}"] = (hook, _fixture(cli, post))
            rows[f"{cli}: (c) hook, {pre}"] = (hook, _fixture(cli, pre))
        # Cline starts the hook file its installer writes: a /bin/sh in front of the hook
        hook_files = scratch / "cline-hooks"
        _, post, pre = ROWS["cline"]
        cline_install.install(hook_files, command=str(bindir / "hookbus"), events=[post, pre])
        for event in (post, pre):
            rows[f"cline: hook file (sh), {event}"] = (
                ["/bin/sh", str(hook_files / event)],
                _fixture("cline", event),
            )
        for name, (command, stdin) in rows.items():  # the fleet answers, not a fallback
            done = subprocess.run(command, input=stdin, capture_output=True, env=env, cwd=scratch)
            if b"unavailable" in done.stdout + done.stderr:
                raise SystemExit(f"{name}: the fleet did not answer: {done.stdout!r}")
        for _ in range(3):  # warm: bytecode, page cache
            for command, stdin in rows.values():
                _spawn(command, stdin, env, cwd=scratch)
        walls: dict[str, list[float]] = {name: [] for name in rows}
        cpus: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(args.runs):
            for name, (command, stdin) in rows.items():
                wall, cpu = _spawn(command, stdin, env, cwd=scratch)
                walls[name].append(wall)
                cpus[name].append(cpu)
        for cli in CACHED:
            binary: Path = getattr(args, cli)
            if not binary.exists():
                missing.append(f"{cli} ({binary} not found)")
                continue
            plugin_ms.update(_plugin_rows(cli, binary, bindir, env, scratch, args.calls))
    finally:
        worker.terminate()
        worker.wait(10)
        shutil.rmtree(scratch, ignore_errors=True)
        keys = list(client.scan_iter(match=namespace_pattern(ns), count=1000))
        if keys:
            client.delete(*keys)
        client.close()

    print(f"hookbus agent-CLI hook benchmark: {args.runs} process starts per row")
    head = f"{'wall p50 (p90) ms':>20s} {'x bare':>7s} {'cpu p50 (p90) ms':>20s} {'x bare':>7s}"
    width = max(len(name) for name in [*rows, *plugin_ms]) + 1
    print(f"{'':{width}s} {head}")
    bare_wall = statistics.median(walls["(a) python -c pass"])
    bare_cpu = statistics.median(cpus["(a) python -c pass"])
    for name in rows:
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        print(
            f"{name:{width}s} {_stats(walls[name]):>20s} {wall / bare_wall:7.2f} "
            f"{_stats(cpus[name]):>20s} {cpu / bare_cpu:7.2f}"
        )
    print(f"in the CLI's runtime, {args.calls} calls per hook (wall; x bare = over (a)):")
    for name, values in plugin_ms.items():
        print(f"{name:{width}s} {_stats(values):>20s} {statistics.median(values) / bare_wall:7.2f}")
    for line in missing:
        print(f"left out: {line}")


if __name__ == "__main__":
    main()
