"""Issue 12 row 13: a subprocess hook's output is capped. A hook printing 100 MB (on stdout,
or on stderr before exiting 2) leaves the worker's memory and logs bounded; the capture is
``max_output_bytes`` (64 KiB by default, configurable per hook) and the run says the output
was truncated. Shell hooks and wake commands share this capture (``ShellCall.execute``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from hookbus.bus import reqrep
from hookbus.bus.keys import Keys
from hookbus.bus.wire import Decision, Event, decode, encode, now_ms
from hookbus.workers.fleet.heartbeat import list_workers

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
FLOOD_BYTES = 100 * 1000 * 1000

WORKER = r"""
import sys, threading
from pathlib import Path
from hookbus.bus.settings.loader import Settings
from hookbus.workers.chain.worker import run_chain_worker
from hookbus.workers.fleet.signals import graceful_signals

url, ns, hooks = sys.argv[1], sys.argv[2], Path(sys.argv[3])
stop = threading.Event()
with graceful_signals(stop):
    run_chain_worker(Settings(redis_url=url, namespace=ns), hooks_dir=hooks, stop_event=stop)
"""


def _shell_hook(root: Path, name: str, script: str, extra: str = "") -> None:
    folder = root / name
    folder.mkdir(parents=True)
    run = folder / "run.sh"
    run.write_text("#!/bin/sh\n" + script + "\n")
    run.chmod(0o755)
    (folder / "HOOK.toml").write_text(
        f'name = "{name}"\nevents = ["PreToolUse"]\nblocking = true\n'
        f'[action.shell]\ncommand = ["./run.sh"]\ntimeout_secs = 20\n{extra}'
    )


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (the respawned serving process included)."""
    pids = [pid]
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in children:
            pids.extend(_tree(int(child)))
    return pids


def _peak_rss_kib(pid: int) -> int:
    """Largest peak resident set (VmHWM) of the worker's processes, in KiB."""
    peak = 0
    for one in _tree(pid):
        try:
            for line in Path(f"/proc/{one}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]))
        except OSError:
            continue
    return peak


def _ask(client: redis.Redis, keys: Keys, hook: str) -> Decision:
    event = Event(kind="PreToolUse", payload={"hook": hook}, deadline=now_ms() + 30_000)
    event.reply_to = keys.reply(event.id)
    client.xadd(keys.requests, {reqrep.REQUEST_FIELD: encode(event)})
    end = time.monotonic() + 30
    while time.monotonic() < end:  # short BLPOPs: redis-py's socket timeout is 5 s
        popped: Any = client.blpop([event.reply_to], timeout=2)
        if popped is not None:
            return decode(popped[1], Decision)
    raise AssertionError("no answer")


def test_a_hook_printing_100_mb_leaves_the_worker_s_memory_and_logs_bounded(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    hooks = tmp_path / "hooks"
    flood = f"head -c {FLOOD_BYTES} /dev/zero | tr '\\0' x"
    only = 'case "$(cat)" in *\\"{name}\\"*) ;; *) exit 0 ;; esac\n'
    _shell_hook(hooks, "stdout-flood", only.format(name="stdout-flood") + flood)
    _shell_hook(hooks, "stderr-flood", only.format(name="stderr-flood") + f"{flood} >&2\nexit 2")
    _shell_hook(
        hooks,
        "small-cap",
        only.format(name="small-cap") + "head -c 5000 /dev/zero | tr '\\0' y",
        "max_output_bytes = 1024\n",
    )
    log = tmp_path / "worker.log"
    keys = Keys.for_namespace(namespace)
    with log.open("wb") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, real_redis_url, namespace, str(hooks)],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    try:
        end = time.monotonic() + 20
        while not [w for w in list_workers(real_redis, keys) if w.role == "chain"]:
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < end, "the worker did not start"
            time.sleep(0.05)
        _ask(real_redis, keys, "warm-up")
        before = _peak_rss_kib(proc.pid)

        out = _ask(real_redis, keys, "stdout-flood")
        (run,) = [r for r in out.trace if r.hook_id == "stdout-flood"]
        assert run.outcome == "error"
        assert run.error is not None and "truncated" in run.error and "65536" in run.error

        err = _ask(real_redis, keys, "stderr-flood")
        assert err.outcome == "deny"
        assert err.reason is not None and "truncated" in err.reason
        assert len(err.reason) < 4096

        small = _ask(real_redis, keys, "small-cap")
        (run,) = [r for r in small.trace if r.hook_id == "small-cap"]
        assert run.error is not None and "1024" in run.error and "truncated" in run.error

        after = _peak_rss_kib(proc.pid)
        grown_mib = (after - before) / 1024
        print(f"worker peak RSS {before / 1024:.1f} MiB -> {after / 1024:.1f} MiB")
        assert grown_mib < 20, f"the worker's peak RSS grew {grown_mib:.1f} MiB"
        assert log.stat().st_size < 256 * 1024, "the worker logged the hook's output"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
