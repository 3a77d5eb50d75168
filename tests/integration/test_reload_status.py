"""``hookbus status`` against a running ``hookbus dev``, and a worker killed under it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import typer
from typer.testing import CliRunner

from hookbus.cli.fleet import reload as reload_cli
from hookbus.cli.fleet import status as status_cli
from tests.reload_helpers import write_hook

ROOT = Path(__file__).resolve().parents[2]
DEAD_AFTER_MS = 2_000

app = typer.Typer()
app.command("status")(status_cli.status)
app.command("reload")(reload_cli.reload)


@pytest.fixture
def env(
    real_redis: redis.Redis, real_redis_url: str, namespace: str, tmp_path: Path
) -> dict[str, str]:
    return {
        "HOOKBUS_RELOAD__DATA_DIR": str(tmp_path / "data"),
        "HOOKBUS_REDIS_URL": real_redis_url,
        "HOOKBUS_NAMESPACE": namespace,
        "HOOKBUS_WORKERS__HEARTBEAT_INTERVAL_MS": "200",
        "HOOKBUS_WORKERS__DEAD_AFTER_MS": str(DEAD_AFTER_MS),
    }


@pytest.fixture
def dev(env: dict[str, str], tmp_path: Path) -> Iterator[Path]:
    hooks = tmp_path / "hooks"
    write_hook(hooks, "alpha")
    full = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    full.update(env, PYTHONPATH=str(ROOT), HOOKBUS_LOG_LEVEL="ERROR")
    proc = subprocess.Popen(
        [sys.executable, "-m", "hookbus", "dev", "--hooks-dir", str(hooks)],
        cwd=tmp_path,
        env=full,
        stdout=subprocess.DEVNULL,
    )
    try:
        yield hooks
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def status(env: dict[str, str]) -> dict[str, Any]:
    out = CliRunner().invoke(app, ["status", "--json"], env=env, catch_exceptions=False)
    data: dict[str, Any] = json.loads(out.stdout)
    chain_alive = any(w["alive"] and w["role"] == "chain" for w in data["workers"])
    assert out.exit_code == (0 if chain_alive else 69), out.output
    return data


def wait_for(env: dict[str, str], ok: Any, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    data = status(env)
    while not ok(data):
        assert time.monotonic() < deadline, f"status never satisfied the check:\n{data}"
        time.sleep(0.1)
        data = status(env)
    return data


def test_status_shows_hookbus_dev_and_a_killed_worker_turns_dead(
    dev: Path, env: dict[str, str]
) -> None:
    def all_up(data: dict[str, Any]) -> bool:
        version = data["bundle"]["version"]
        up = [w for w in data["workers"] if w["alive"] and w["version"] == version]
        return version is not None and {w["role"] for w in up} == {"chain", "fanout", "rq"}

    data = wait_for(env, all_up, timeout_s=60)
    assert data["bundle"]["hooks"] == ["alpha"]
    assert data["bundle"]["who"] == "hookbus dev"
    chain = next(w for w in data["workers"] if w["role"] == "chain")
    assert chain["hooks"] == 1
    assert chain["problems"] == []
    assert {s["name"] for s in data["streams"]} >= {"requests", "events"}
    table = CliRunner().invoke(app, ["status"], env=env)
    assert data["bundle"]["version"] in table.stdout

    os.kill(chain["pid"], signal.SIGKILL)
    killed = time.monotonic()
    wait_for(
        env,
        lambda d: any(w["id"] == chain["id"] and not w["alive"] for w in d["workers"]),
        timeout_s=DEAD_AFTER_MS / 1000 + 3,
    )
    assert time.monotonic() - killed < DEAD_AFTER_MS / 1000 + 3

    wait_for(
        env,
        lambda d: any(w["role"] == "chain" and w["alive"] for w in d["workers"]),
        timeout_s=30,
    )  # hookbus dev restarts the killed worker
    write_hook(dev, "beta")
    out = CliRunner().invoke(app, ["reload", "--dir", str(dev), "--wait", "15", "--json"], env=env)
    assert out.exit_code == 0, out.output
    acks = json.loads(out.stdout)["acks"]
    assert {a["role"] for a in acks} == {"chain", "fanout", "rq"}
    assert all(a["switched"] and a["hooks"] == 2 for a in acks)


def test_gather_reports_stream_length_pending_and_lag_per_group(
    real_redis: redis.Redis, namespace: str
) -> None:
    from hookbus.bus.keys import Keys
    from hookbus.bus.settings.loader import Settings
    from hookbus.workers.fleet.status import gather

    keys = Keys.for_namespace(namespace)
    real_redis.xgroup_create(keys.requests, "chain", id="0", mkstream=True)
    for i in range(5):
        real_redis.xadd(keys.requests, {"n": str(i)})
    real_redis.xreadgroup("chain", "c1", {keys.requests: ">"}, count=2)
    snapshot = gather(real_redis, Settings(namespace=namespace))
    requests = next(s for s in snapshot.streams if s.name == "requests")
    assert requests.length == 5
    (group,) = requests.groups
    assert (group.name, group.consumers, group.pending, group.lag) == ("chain", 1, 2, 3)
    events = next(s for s in snapshot.streams if s.name == "events")
    assert (events.length, events.groups) == (0, [])
    assert snapshot.queues[0].queued == 0
