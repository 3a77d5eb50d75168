"""The hooks folder the soak harness writes for itself (see ``benchmarks/soak.py``).

Every hook is a small python hook whose behaviour hangs on payload markers, so the harness
decides per request what happens, and two of them record each run (event id, hook id, pid,
monotonic time: one JSON line appended with O_APPEND, atomic for short lines) so runs can be
counted exactly:

* ``soak-guard`` (PreToolUse): denies a command containing ``SOAK-DENY``; the reason
  carries the bundle's generation, which a reload bumps.
* ``soak-chain-runs`` (PreToolUse): records each blocking run (a doubled run is a defect).
* ``soak-crash`` / ``soak-crash-async``: ``os._exit`` on ``tool_name = SoakCrash``.
* ``soak-hang`` / ``soak-hang-async``: sleep 30 s on ``tool_name = SoakHang``.
* ``soak-gil`` (``tool_name = SoakGil``): records its run, then holds the GIL for about
  0.4 s in one C call (a run seen twice is a steal of a live worker's entry: issue 12,
  row 5; its reply comes after a 250 ms deadline: row 2's late reply).
* ``soak-runs`` (every PostToolUse) and ``soak-runs-edit`` (PostToolUse of ``Edit``): the
  non-blocking telemetry whose lines ``events.runs`` counts.
"""

from __future__ import annotations

import json
from pathlib import Path

#: Tool names that select the crashing, hanging and GIL-holding hooks.
CRASH_TOOL = "SoakCrash"
HANG_TOOL = "SoakHang"
GIL_TOOL = "SoakGil"
#: Marker in a blocking request's command that the guard denies.
DENY_MARKER = "SOAK-DENY"
#: Non-blocking hooks whose runs are recorded, with the tools each one matches (None: all).
RECORDED_ASYNC_HOOKS: dict[str, str | None] = {"soak-runs": None, "soak-runs-edit": "Edit"}
#: Blocking hooks whose runs are recorded.
RECORDED_CHAIN_HOOK = "soak-chain-runs"
RECORDED_GIL_HOOK = "soak-gil"

_RECORD_SRC = """
import json, os, time

RUNS_FILE = {runs_file}


def record(event):
    # t: CLOCK_MONOTONIC, the harness's clock too, so a run can be put next to the faults
    run = {{"e": event.id, "h": {hook_id}, "pid": os.getpid(), "t": time.monotonic()}}
    line = json.dumps(run) + "\\n"
    fd = os.open(RUNS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
    return None
"""

_GUARD_SRC = """
GENERATION = {generation}


def check(event):
    command = str(event.payload.get("tool_input", {{}}).get("command", ""))
    if {marker} in command:
        return {{"outcome": "deny", "reason": f"soak guard (generation {{GENERATION}})"}}
    return None
"""

_CRASH_SRC = """
import os


def crash(event):
    os._exit(70)
"""

_GIL_SRC = """
import time

from {record_module} import record

_t = time.perf_counter()
sum(range(2_000_000))
# aim at 0.4 s: the hold must outlast a 250 ms deadline for the reused-event fault, and
# how long it really lasts depends on the host's load (measured 0.1-2.8 s on 2 busy cores)
_N = int(2_000_000 * 0.4 / max(time.perf_counter() - _t, 1e-4))


def hold(event):
    record(event)
    sum(range(_N))  # one C call: the GIL is not released for about 0.4 s
    return None
"""

_HANG_SRC = """
import time


def hang(event):
    time.sleep(30)
    return None
"""


def _write(folder: Path, manifest: str, module: str, source: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "HOOK.toml").write_text(manifest, encoding="utf-8")
    (folder / f"{module}.py").write_text(source, encoding="utf-8")


def _manifest(
    name: str,
    event: str,
    entrypoint: str,
    *,
    priority: int = 100,
    tools: str | None = None,
    timeout_s: int = 1,
    retries: int = 0,
) -> str:
    lines = [
        f"name = {json.dumps(name)}",
        f'description = "soak harness hook {name}"',
        f"events = [{json.dumps(event)}]",
        f"priority = {priority}",
    ]
    if tools is not None:
        lines += ["", "[match]", f"tools = [{json.dumps(tools)}]"]
    lines += ["", "[action.python]", f"entrypoint = {json.dumps(entrypoint)}"]
    lines += [f"timeout_secs = {timeout_s}"]
    if retries:
        intervals = ", ".join(["1"] * retries)
        lines += ["", "[retries]", f"count = {retries}", f"intervals_s = [{intervals}]"]
    return "\n".join(lines) + "\n"


def write_hooks(root: Path, runs_dir: Path, generation: int = 1) -> None:
    """Write (or rewrite) the whole soak hooks folder under ``root``."""
    chain_runs = json.dumps(str(runs_dir / "chain_runs.jsonl"))
    async_runs = json.dumps(str(runs_dir / "runs.jsonl"))
    _write(
        root / "soak-guard",
        _manifest("soak-guard", "PreToolUse", "guard:check", priority=10),
        "guard",
        _GUARD_SRC.format(generation=generation, marker=json.dumps(DENY_MARKER)),
    )
    _write(
        root / RECORDED_CHAIN_HOOK,
        _manifest(RECORDED_CHAIN_HOOK, "PreToolUse", "chainruns:record", priority=20),
        "chainruns",
        _RECORD_SRC.format(runs_file=chain_runs, hook_id=json.dumps(RECORDED_CHAIN_HOOK)),
    )
    _write(
        root / "soak-crash",
        _manifest("soak-crash", "PreToolUse", "crash:crash", priority=30, tools=CRASH_TOOL),
        "crash",
        _CRASH_SRC,
    )
    _write(
        root / "soak-hang",
        _manifest("soak-hang", "PreToolUse", "hang:hang", priority=30, tools=HANG_TOOL),
        "hang",
        _HANG_SRC,
    )
    gil = root / RECORDED_GIL_HOOK
    _write(
        gil,
        _manifest(RECORDED_GIL_HOOK, "PreToolUse", "gil:hold", priority=30, tools=GIL_TOOL),
        "gil",
        _GIL_SRC.format(record_module="gilrecord"),
    )
    (gil / "gilrecord.py").write_text(
        _RECORD_SRC.format(runs_file=chain_runs, hook_id=json.dumps(RECORDED_GIL_HOOK)),
        encoding="utf-8",
    )
    for name, tools in RECORDED_ASYNC_HOOKS.items():
        module = name.replace("-", "_")
        _write(
            root / name,
            _manifest(name, "PostToolUse", f"{module}:record", tools=tools, retries=2),
            module,
            _RECORD_SRC.format(runs_file=async_runs, hook_id=json.dumps(name)),
        )
    _write(
        root / "soak-crash-async",
        _manifest("soak-crash-async", "PostToolUse", "crash_async:crash", tools=CRASH_TOOL),
        "crash_async",
        _CRASH_SRC,
    )
    _write(
        root / "soak-hang-async",
        _manifest("soak-hang-async", "PostToolUse", "hang_async:hang", tools=HANG_TOOL),
        "hang_async",
        _HANG_SRC,
    )
