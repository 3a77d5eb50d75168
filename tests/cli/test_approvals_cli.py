"""``hookbus approvals`` and ``hookbus console`` as an operator types them."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import redis

from hookbus import HookBus
from hookbus.approvals.inbox import ApprovalInbox
from hookbus.bus.wire import Event
from tests.approval_helpers import (
    ask_payload,
    cli,
    parked,
    settings_for,
    start_worker,
    stop_worker,
    wait_alive,
)


@pytest.mark.integration
def test_list_shows_each_pending_item_and_allow_of_an_unknown_id_fails(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    empty = cli(real_redis_url, namespace, "approvals", "list")
    assert empty.returncode == 0 and "no approvals waiting" in empty.stdout
    assert json.loads(cli(real_redis_url, namespace, "approvals", "list", "--json").stdout) == {
        "pending": [],
        "recent": [],
    }
    proc = start_worker(real_redis_url, namespace)
    settings = settings_for(real_redis_url, namespace)
    try:
        wait_alive(real_redis, namespace, proc)
        with HookBus.from_settings(settings) as bus:
            event = Event(
                kind="PreToolUse", agent_id="ci-7", session_id="s9", payload=ask_payload()
            )
            thread = threading.Thread(target=bus.request, args=(event,), daemon=True)
            thread.start()
            (item,) = parked(ApprovalInbox(settings))
            shown = cli(real_redis_url, namespace, "approvals", "list", "--json")
            (row,) = json.loads(shown.stdout)["pending"]
            fields = ("id", "agent", "session", "kind", "tool", "input", "hook")
            assert {k: row[k] for k in fields} == {
                "id": item.id, "agent": "ci-7", "session": "s9", "kind": "PreToolUse",
                "tool": "Bash", "input": "rm -rf build", "hook": "guard",
            }  # fmt: skip
            assert row["reason"] == "a person must look at this"
            assert row["expires_ms"] - row["asked_ms"] == 30_000
            table = cli(real_redis_url, namespace, "approvals", "list")
            for text in (item.id, "ci-7", "Bash", "build", "guard"):  # 80 columns: folded
                assert text in table.stdout
            unknown = cli(real_redis_url, namespace, "approvals", "allow", "000000000000")
            assert unknown.returncode == 1 and "no approval '000000000000'" in unknown.stderr
            bad = cli(real_redis_url, namespace, "approvals", "deny", "not-an-id", "--json")
            assert bad.returncode == 1 and json.loads(bad.stdout)["ok"] is False
            done = cli(real_redis_url, namespace, "approvals", "deny", item.id, "--as", "bob")
            assert done.returncode == 0
            thread.join(10)
        recent = cli(real_redis_url, namespace, "approvals", "list", "--recent", "5")
        assert f"{item.id} denied by operator:bob" in recent.stdout
    finally:
        stop_worker(proc)


def test_the_console_refuses_a_non_loopback_host_without_a_token_file(tmp_path: Path) -> None:
    refused = cli("redis://127.0.0.1:1/0", "x", "console", "--host", "0.0.0.0", "--port", "1")
    assert refused.returncode == 64
    assert "not a loopback address" in refused.stderr and "--token-file" in refused.stderr
    short = tmp_path / "token"
    short.write_text("short\n")
    short.chmod(0o600)
    too_short = cli("redis://127.0.0.1:1/0", "x", "console", "--token-file", str(short))
    assert too_short.returncode == 64 and "at least 16 characters" in too_short.stderr


@pytest.mark.integration
def test_list_watch_json_prints_each_change_as_it_happens(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    import os
    import subprocess
    import sys

    from tests.approval_helpers import ROOT

    proc = start_worker(real_redis_url, namespace)
    env = dict(
        os.environ, HOOKBUS_REDIS_URL=real_redis_url, HOOKBUS_NAMESPACE=namespace,
        PYTHONPATH=str(ROOT),
    )  # fmt: skip
    watch = subprocess.Popen(
        [sys.executable, "-m", "hookbus", "approvals", "list", "--watch", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
    )  # fmt: skip
    settings = settings_for(real_redis_url, namespace)
    try:
        wait_alive(real_redis, namespace, proc)
        import time

        time.sleep(1.5)  # the watch has read where the log ends
        with HookBus.from_settings(settings) as bus:
            thread = threading.Thread(
                target=bus.request, args=(Event(kind="PreToolUse", payload=ask_payload()),),
                daemon=True,
            )  # fmt: skip
            thread.start()
            (item,) = parked(ApprovalInbox(settings))
            ApprovalInbox(settings).decide(item.id, "allow", who="ann")
            thread.join(10)
        assert watch.stdout is not None
        first = json.loads(watch.stdout.readline())
        second = json.loads(watch.stdout.readline())
    finally:
        watch.terminate()
        watch.communicate(timeout=10)
        stop_worker(proc)
    assert (first["type"], first["approval"]) == ("pending", item.id)
    assert (second["type"], second["approval"], second["by"]) == (
        "allowed",
        item.id,
        "operator:ann",
    )
