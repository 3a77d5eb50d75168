"""Issue 13 "Done when": every worker role hardens itself at start (non-dumpable) and says
how its hooks are confined, in its log and in its heartbeat (``confinement``, which
``hookbus status`` renders and warns on when it starts with ``none``)."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from hookbus.bus.keys import Keys
from hookbus.bus.settings.loader import load_settings
from hookbus.hooks.actions import confine
from hookbus.hooks.registry import HookRegistry
from hookbus.workers.fleet.heartbeat import list_workers
from hookbus.workers.reload.hookset import HookHost
from tests.reload_helpers import write_hook

pytestmark = pytest.mark.integration

_PR_GET_DUMPABLE = 3
ROOT = Path(__file__).resolve().parents[2]


def test_a_hook_host_hardens_its_process_and_reports_its_confinement(
    real_redis: redis.Redis, real_redis_url: str, namespace: str, tmp_path: Path
) -> None:
    write_hook(tmp_path, "a")
    settings = load_settings(
        environ={"HOOKBUS_REDIS_URL": real_redis_url, "HOOKBUS_NAMESPACE": namespace},
        warn=False,
    ).settings
    host = HookHost(HookRegistry.from_settings(settings), settings, hooks_dir=tmp_path)
    assert host.info()["confinement"] == "unprobed"

    host.start(real_redis)
    try:
        line = host.info()["confinement"]
    finally:
        host.stop()

    assert line == confine.describe()
    assert line.startswith(confine.confinement())
    assert ctypes.CDLL(None).prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0) == 0


@pytest.mark.parametrize("role", ["chain", "fanout", "rq"])
def test_every_worker_role_publishes_its_confinement_in_its_heartbeat(
    real_redis: redis.Redis, real_redis_url: str, namespace: str, tmp_path: Path, role: str
) -> None:
    write_hook(tmp_path, "a")
    env = {
        **os.environ,
        "HOOKBUS_REDIS_URL": real_redis_url,
        "HOOKBUS_NAMESPACE": namespace,
        "HOOKBUS_WORKERS__HEARTBEAT_INTERVAL_MS": "200",
        "HOOKBUS_LOG_LEVEL": "INFO",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "hookbus", "worker", "--role", role, "--hooks-dir", str(tmp_path)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    keys = Keys.for_namespace(namespace)
    seen: str | None = None
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and seen is None:
            for worker in list_workers(real_redis, keys):
                value = worker.extra.get("confinement")
                if worker.role == role and isinstance(value, str):
                    seen = value
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    assert seen is not None, err.decode(errors="replace")[-2000:]
    assert seen == confine.describe(), seen
    assert f"hook confinement: {seen}" in err.decode(errors="replace")
