"""Issue 13 row 10 on the real server: ``hookbus hooks history`` lists every change to the
fleet from an append-only, hash-chained stream, and reports a broken chain."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import typer
from typer.testing import CliRunner

from hookbus.authoring import release
from hookbus.authoring.pending import folder_digest
from hookbus.bundles import history
from hookbus.bus.keys import hook_history
from hookbus.bus.settings.loader import Settings
from hookbus.cli.hooks import history as history_cli
from tests.reload_helpers import write_hook

app = typer.Typer()
app.command("history")(history_cli.history)
app.command("other")(lambda: None)  # keep "history" a sub-command, as under `hooks`


@pytest.fixture
def cli(real_redis: redis.Redis, real_redis_url: str, namespace: str) -> Iterator[Any]:
    runner = CliRunner()
    env = {"HOOKBUS_REDIS_URL": real_redis_url, "HOOKBUS_NAMESPACE": namespace}

    def invoke(*args: str) -> Any:
        return runner.invoke(app, ["history", *args], env=env, catch_exceptions=False)

    yield invoke


def test_history_lists_writes_approvals_rejections_and_reloads_with_their_fields(
    cli: Any, real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    history.append(
        real_redis, namespace, action="write", actor="agent:a1", hook="lint", sha256="1" * 64
    )
    history.append(
        real_redis, namespace, action="approve", actor="ops@host", hook="lint", sha256="1" * 64
    )
    history.append(
        real_redis, namespace, action="reject", actor="ops@host", hook="rm-all", sha256="2" * 64
    )
    hooks = tmp_path / "hooks"
    write_hook(hooks, "lint")
    pushed = release.release_folder(
        real_redis, Settings(namespace=namespace), hooks, who="ops@host", signing_key=None
    )
    out = cli("--json")
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["chain"] == {"ok": True, "entries": 4, "breaks": []}
    rows = data["entries"]
    assert [(r["action"], r["actor"], r["hook"]) for r in rows] == [
        ("write", "agent:a1", "lint"),
        ("approve", "ops@host", "lint"),
        ("reject", "ops@host", "rm-all"),
        ("reload", "ops@host", "*"),
    ]
    assert all(isinstance(r["at"], int) and r["at"] > 0 for r in rows)
    assert rows[3]["extra"]["version"] == pushed.version
    assert rows[3]["sha256"].startswith(pushed.version)


def test_a_deleted_entry_breaks_the_chain_and_history_says_where(
    cli: Any, real_redis: redis.Redis, namespace: str
) -> None:
    for n in range(3):
        history.append(
            real_redis, namespace, action="write", actor="a", hook=f"h{n}", sha256=str(n) * 64
        )
    entries = history.read(real_redis, namespace)
    real_redis.xdel(hook_history(namespace), entries[1].id)
    out = cli("--json")
    assert out.exit_code == 1
    data = json.loads(out.stdout)
    assert data["ok"] is False
    assert any(entries[2].id in b and "does not follow" in b for b in data["chain"]["breaks"])


def test_an_entry_rewritten_in_place_breaks_the_chain(
    real_redis: redis.Redis, namespace: str
) -> None:
    history.append(real_redis, namespace, action="write", actor="a", hook="x", sha256="0" * 64)
    history.append(real_redis, namespace, action="reload", actor="a", hook="*", sha256="1" * 64)
    key = hook_history(namespace)
    first, second = history.read(real_redis, namespace)
    # replace the first entry with one naming another actor, keeping its prev and hash
    real_redis.delete(key)
    real_redis.xadd(
        key,
        {
            "action": "write",
            "actor": "someone-else",
            "hook": "x",
            "sha256": "0" * 64,
            "at": str(first.at),
            "extra": "{}",
            "prev": first.prev,
            "hash": first.hash,
        },
    )
    real_redis.xadd(
        key,
        {
            "action": "reload",
            "actor": "a",
            "hook": "*",
            "sha256": "1" * 64,
            "at": str(second.at),
            "extra": "{}",
            "prev": second.prev,
            "hash": second.hash,
        },
    )
    report = history.verify(real_redis, namespace)
    assert not report.ok
    assert any("edited" in b for b in report.breaks)


def test_concurrent_appends_all_land_on_one_unbroken_chain(
    real_redis: redis.Redis, real_redis_url: str, namespace: str
) -> None:
    def writer(n: int) -> None:
        client = redis.Redis.from_url(real_redis_url, protocol=2)
        for i in range(10):
            history.append(
                client, namespace, action="write", actor=f"w{n}", hook=f"h{i}", sha256="f" * 64
            )
        client.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    report = history.verify(real_redis, namespace)
    assert report.entries == 40
    assert report.ok, report.breaks


def test_hooks_write_approve_and_reject_are_recorded_with_their_actor_and_digest(
    cli: Any, real_redis: redis.Redis, real_redis_url: str, namespace: str, tmp_path: Path
) -> None:
    from hookbus.cli.hooks import authoring as hooks_authoring

    authoring = typer.Typer()
    for name in ("write", "approve", "reject"):
        authoring.command(name)(getattr(hooks_authoring, name))
    env = {
        "HOOKBUS_REDIS_URL": real_redis_url,
        "HOOKBUS_NAMESPACE": namespace,
        "HOOKBUS_CONFIG": None,
        "HOOKBUS_HOOKS_DIR": None,
    }
    hooks = tmp_path / "hooks"
    runner = CliRunner()
    for name in ("lint", "wipe"):
        spec = json.dumps({"name": name, "events": ["PreToolUse"], "action": {"command": "true"}})
        args = ["write", "--dir", str(hooks), "--author", "a1"]
        written = runner.invoke(authoring, args, env=env, input=spec)
        assert written.exit_code == 0, written.output
    read = folder_digest(hooks / ".pending" / "lint")
    approve = ["approve", "lint", "--dir", str(hooks), "--digest", read]
    assert runner.invoke(authoring, approve, env=env).exit_code == 0
    assert runner.invoke(authoring, ["reject", "wipe", "--dir", str(hooks)], env=env).exit_code == 0
    data = json.loads(cli("--json").stdout)
    rows = [(r["action"], r["actor"], r["hook"]) for r in data["entries"]]
    assert rows[:2] == [("write", "agent:a1", "lint"), ("write", "agent:a1", "wipe")]
    assert [r[0] for r in rows[2:]] == ["approve", "reject"]
    assert [r[2] for r in rows[2:]] == ["lint", "wipe"]
    write_lint, approve_lint = data["entries"][0], data["entries"][2]
    assert write_lint["sha256"] == approve_lint["sha256"], "the approved bytes are the written ones"
    assert data["chain"]["ok"]


def test_a_rollback_is_recorded_with_who_did_it_and_the_version(
    real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    settings = Settings(namespace=namespace)
    hooks = tmp_path / "hooks"
    write_hook(hooks, "lint")
    first = release.release_folder(real_redis, settings, hooks, signing_key=None)
    write_hook(hooks, "fmt")
    second = release.release_folder(real_redis, settings, hooks, signing_key=None)
    back = release.rollback(real_redis, settings, who="ops@host")
    assert back.version == first.version
    *_, last = history.read(real_redis, namespace)
    assert (last.action, last.actor, last.hook) == ("rollback", "ops@host", "*")
    assert last.extra == {"version": first.version, "previous": second.version}
    assert last.sha256.startswith(first.version)
