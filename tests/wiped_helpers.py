"""What the tests of a Redis that lost its state share: wiping one namespace the way an
empty restart leaves it, and a ``hookbus worker --role chain`` started with no hooks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

from hookbus.bus.keys import Keys
from hookbus.workers.fleet.heartbeat import list_workers

ROOT = Path(__file__).resolve().parents[1]


def wipe_namespace(client: redis.Redis, ns: str) -> int:
    """Delete every key of namespace ``ns`` (all partitions): what a Redis restarted with
    nothing kept holds of it. Returns how many keys were deleted."""
    deleted = 0
    for pattern in (f"hookbus:{{{ns}}}*", f"hookbus:{{{ns}:*", f"hookbus:{{{ns}~*"):
        for key in client.scan_iter(match=pattern, count=1000):
            deleted += int(client.delete(key))
    return deleted


@contextmanager
def chain_worker_without_hooks(url: str, ns: str, work: Path) -> Iterator[Path]:
    """``hookbus worker --role chain`` with no hooks folder and no bundle in Redis, until it
    heartbeats; yields its log file; stopped (SIGTERM) on exit."""
    with chain_worker_cli(url, ns, work) as (log_file, _proc):
        yield log_file


@contextmanager
def chain_worker_cli(
    url: str,
    ns: str,
    work: Path,
    *,
    name: str = "chain",
    env: dict[str, str] | None = None,
    hooks_dir: Path | None = None,
) -> Iterator[tuple[Path, subprocess.Popen[bytes]]]:
    """``hookbus worker --role chain`` (its cache under ``work/<name>-cache``, extra ``env``,
    ``--hooks-dir`` when given), until it heartbeats; yields its log file and process;
    stopped (SIGTERM) on exit."""
    log_file = work / f"{name}.log"
    base = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    base.update(HOOKBUS_REDIS_URL=url, HOOKBUS_NAMESPACE=ns, PYTHONPATH=str(ROOT))
    base["XDG_CACHE_HOME"] = str(work / f"{name}-cache")
    base.update(env or {})
    client = redis.Redis.from_url(url)
    keys = Keys.for_namespace(ns)
    with log_file.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                *("-m", "hookbus", "worker", "--role", "chain"),
                *(("--hooks-dir", str(hooks_dir)) if hooks_dir is not None else ()),
            ],
            env=base,
            cwd=work,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 30
        while not [w for w in list_workers(client, keys) if w.pid == proc.pid]:
            assert proc.poll() is None, log_file.read_text()[-3000:]
            assert time.monotonic() < deadline, "the chain worker did not start"
            time.sleep(0.1)
        time.sleep(0.3)  # blocked in its read
        yield log_file, proc
    finally:
        client.close()
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
