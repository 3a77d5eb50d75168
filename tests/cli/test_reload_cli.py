"""``hookbus reload`` and ``hookbus status`` through typer's CliRunner, on the real server."""

from __future__ import annotations

import json
import os
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

from hookbus.bus.keys import Keys
from hookbus.cli.fleet import reload as reload_cli
from hookbus.cli.fleet import status as status_cli
from hookbus.cli.support import EXIT_USAGE
from hookbus.workers.fleet.heartbeat import Heartbeat
from tests.reload_helpers import write_broken_hook, write_hook

app = typer.Typer()
app.command("reload")(reload_cli.reload)
app.command("status")(status_cli.status)


@pytest.fixture
def cli(real_redis: redis.Redis, real_redis_url: str, namespace: str) -> Iterator[Any]:
    runner = CliRunner()
    env = {"HOOKBUS_REDIS_URL": real_redis_url, "HOOKBUS_NAMESPACE": namespace}

    def invoke(*args: str) -> Any:
        return runner.invoke(app, list(args), env=env, catch_exceptions=False)

    yield invoke


@pytest.fixture
def hooks(tmp_path: Path) -> Path:
    root = tmp_path / "hooks"
    write_hook(root, "alpha")
    return root


def test_reload_pushes_then_says_nothing_to_do_for_the_same_folder(cli: Any, hooks: Path) -> None:
    first = cli("reload", "--dir", str(hooks), "--json")
    assert first.exit_code == 0, first.output
    data = json.loads(first.stdout)
    assert data["changed"] is True
    assert data["hooks"] == ["alpha"]
    again = cli("reload", "--dir", str(hooks))
    assert again.exit_code == 0
    assert "already current" in again.stdout


def test_reload_lists_versions_and_rolls_back_to_the_previous_one(cli: Any, hooks: Path) -> None:
    v1 = json.loads(cli("reload", "--dir", str(hooks), "--json").stdout)["version"]
    write_hook(hooks, "beta")
    v2 = json.loads(cli("reload", "--dir", str(hooks), "--json").stdout)["version"]
    listed = json.loads(cli("reload", "--list", "--json").stdout)
    assert [e["version"] for e in listed] == [v2, v1]
    assert listed[0]["current"] is True
    assert listed[0]["hooks"] == 2
    table = cli("reload", "--list")
    assert v1 in table.stdout and v2 in table.stdout
    back = cli("reload", "--rollback", "--json")
    assert back.exit_code == 0, back.output
    assert json.loads(back.stdout)["version"] == v1
    forward = cli("reload", "--rollback", v2)
    assert forward.exit_code == 0
    assert f"rolled back to bundle {v2}" in forward.stdout


def test_a_version_without_rollback_is_a_usage_error(cli: Any) -> None:
    out = cli("reload", "abcdef")
    assert out.exit_code == EXIT_USAGE
    assert "--rollback" in out.output


def test_a_folder_with_a_broken_hook_is_refused_by_default_naming_the_hook(
    cli: Any, hooks: Path
) -> None:
    write_broken_hook(hooks, "broken")
    out = cli("reload", "--dir", str(hooks))
    assert out.exit_code == 1
    assert "hook broken" in out.output
    assert "nothing was published" in out.output


def test_allow_partial_leaves_the_broken_hook_out_and_says_so(cli: Any, hooks: Path) -> None:
    write_broken_hook(hooks, "broken")
    out = cli("reload", "--dir", str(hooks), "--allow-partial", "--json")
    assert out.exit_code == 0
    data = json.loads(out.stdout)
    assert data["hooks"] == ["alpha"]
    assert data["left_out"] == ["broken"]
    assert any("broken" in p for p in data["problems"])


def _fake_worker(
    client: redis.Redis, namespace: str, version_of: Any, role: str = "chain"
) -> Heartbeat:
    return Heartbeat(
        client,
        Keys.for_namespace(namespace),
        role=role,
        interval_ms=20,
        info=lambda: {"version": version_of(), "hooks": 1, "problems": []},
    ).start()


def test_reload_wait_exits_1_when_a_live_worker_does_not_switch(
    cli: Any, hooks: Path, real_redis: redis.Redis, namespace: str
) -> None:
    worker = _fake_worker(real_redis, namespace, lambda: "old")
    try:
        out = cli("reload", "--dir", str(hooks), "--wait", "0.3", "--json")
    finally:
        worker.stop()
    assert out.exit_code == 1
    data = json.loads(out.stdout)
    assert data["ok"] is False
    assert [a["switched"] for a in data["acks"]] == [False]


def test_reload_wait_prints_each_ack_and_exits_0_when_all_switch(
    cli: Any, hooks: Path, real_redis: redis.Redis, namespace: str
) -> None:
    stamp = Keys.for_namespace(namespace).bundle_stamp

    def following() -> str | None:
        raw = real_redis.get(stamp)
        return raw.decode() if raw else None

    worker = _fake_worker(real_redis, namespace, following)
    try:
        out = cli("reload", "--dir", str(hooks), "--wait", "5")
    finally:
        worker.stop()
    assert out.exit_code == 0, out.output
    assert f"ack {worker.worker_id}" in out.stdout


def test_status_json_shows_the_bundle_workers_streams_and_queues(
    cli: Any, hooks: Path, real_redis: redis.Redis, namespace: str
) -> None:
    version = json.loads(cli("reload", "--dir", str(hooks), "--json").stdout)["version"]
    worker = _fake_worker(real_redis, namespace, lambda: version)
    try:
        out = cli("status", "--json")
    finally:
        worker.stop()
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["bundle"]["version"] == version
    (row,) = data["workers"]
    assert row["id"] == worker.worker_id
    assert row["alive"] is True
    assert {s["name"] for s in data["streams"]} >= {"requests", "events"}
    assert data["queues"][0]["name"] == f"hookbus-{namespace}"


def test_status_marks_a_silent_worker_dead_and_prunes_a_long_dead_one(
    cli: Any, real_redis: redis.Redis, namespace: str
) -> None:
    keys = Keys.for_namespace(namespace)
    now = int(time.time() * 1000)
    for wid, age_ms in (("quiet", 10_000), ("ancient", 10_000_000)):
        entry = {
            "id": wid,
            "role": "chain",
            "host": "h",
            "pid": 1,
            "started_ms": now - age_ms,
            "last_ms": now - age_ms,
            "version": None,
            "hooks": 0,
            "problems": [],
        }
        real_redis.hset(keys.workers, wid, json.dumps(entry))
    out = cli("status", "--json")
    data = json.loads(out.stdout)
    assert [(w["id"], w["alive"]) for w in data["workers"]] == [("quiet", False)]
    assert data["pruned"] == ["ancient"]
    table = cli("status")
    assert "DEAD" in table.stdout


def test_status_watch_refreshes_and_stops_after_the_given_iterations(cli: Any) -> None:
    out = cli("status", "--watch", "--interval", "0.1", "--iterations", "2")
    assert out.exit_code == 0
    assert "workers" in out.stdout


def test_reload_and_status_are_commands_of_the_hookbus_cli(
    hooks: Path, real_redis: redis.Redis, real_redis_url: str, namespace: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env.update(HOOKBUS_REDIS_URL=real_redis_url, HOOKBUS_NAMESPACE=namespace, COLUMNS="200")
    out = subprocess.run(
        [sys.executable, "-m", "hookbus", "--json", "reload", "--dir", str(hooks)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["changed"] is True


def test_reload_names_each_pending_hook_it_leaves_out(cli: Any, hooks: Path) -> None:
    write_hook(hooks / ".pending", "agent-made")
    out = cli("reload", "--dir", str(hooks), "--json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["pending"] == ["agent-made"]
    again = cli("reload", "--dir", str(hooks))
    assert "pending: agent-made" in again.output


def test_reload_signs_with_the_key_named_by_the_environment(
    real_redis_url: str, namespace: str, hooks: Path, tmp_path: Path
) -> None:
    from hookbus.bundles import signing
    from hookbus.errors import ConfigError

    pair = signing.generate_keys(tmp_path / "keys")
    env = {
        "HOOKBUS_REDIS_URL": real_redis_url,
        "HOOKBUS_NAMESPACE": namespace,
        "HOOKBUS_SIGNING_KEY_FILE": str(pair.signing),
    }
    out = CliRunner().invoke(app, ["reload", "--dir", str(hooks), "--json"], env=env)
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["signed_by"] == pair.key_id
    env["HOOKBUS_SIGNING_KEY_FILE"] = str(tmp_path / "missing.key")
    missing = CliRunner().invoke(app, ["reload", "--dir", str(hooks)], env=env)
    assert isinstance(missing.exception, ConfigError)
    assert "HOOKBUS_SIGNING_KEY_FILE" in str(missing.exception)
