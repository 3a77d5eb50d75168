"""The console's JSON API with the bearer token, and the console while Redis restarts."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from hookbus import HookBus
from hookbus.approvals.inbox import ApprovalInbox
from hookbus.bus.wire import Event
from tests.approval_helpers import (
    ask_payload,
    parked,
    settings_for,
    start_worker,
    stop_worker,
    wait_alive,
    wait_for,
)
from tests.console_helpers import TOKEN, ConsoleProc, chromium

BEARER = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def fleet(real_redis_url: str, real_redis: redis.Redis, namespace: str) -> Iterator[str]:
    proc = start_worker(real_redis_url, namespace)
    try:
        wait_alive(real_redis, namespace, proc)
        yield namespace
    finally:
        stop_worker(proc)


def test_the_api_decides_once_and_answers_the_waiting_call(
    real_redis_url: str, fleet: str, tmp_path: Path
) -> None:
    console = ConsoleProc(real_redis_url, fleet, tmp_path)
    settings = settings_for(real_redis_url, fleet)
    out: list[Any] = []
    try:
        with (
            HookBus.from_settings(settings) as bus,
            httpx.Client(base_url=console.base, headers=BEARER, timeout=10) as api,
        ):
            thread = threading.Thread(
                target=lambda: out.append(
                    bus.request(Event(kind="PreToolUse", agent_id="ci-3", payload=ask_payload()))
                ),
                daemon=True,
            )
            thread.start()
            (item,) = parked(ApprovalInbox(settings))
            listed = api.get("/api/approvals").json()
            assert [p["id"] for p in listed["pending"]] == [item.id]
            assert (
                api.post(f"/api/approvals/{item.id}", json={"decision": "maybe"}).status_code == 400
            )
            assert (
                api.post("/api/approvals/abcdefabcdef", json={"decision": "allow"}).status_code
                == 404
            )
            won = api.post(f"/api/approvals/{item.id}", json={"decision": "deny", "reason": "no"})
            assert won.status_code == 200 and won.json()["decided_by"] == "operator:ann"
            again = api.post(f"/api/approvals/{item.id}", json={"decision": "allow"})
            assert again.status_code == 409
            assert again.json()["decided_by"] == "operator:ann"
            assert "already denied by operator:ann" in again.json()["error"]
            thread.join(10)
            status = api.get("/api/status").json()
            assert status["pending_approvals"] == 0 and status["workers"]
            rows = api.get("/api/decisions", params={"agent": "ci-3"}).json()["decisions"]
            assert [r["outcome"] for r in rows] == ["deny", "ask"]
            assert rows[0]["approval"]["decided_by"] == "operator:ann"
            assert api.post("/api/hooks/nope/approve").status_code == 404
    finally:
        console.stop()
    assert out[0].outcome == "deny" and out[0].reason == "denied by operator:ann: no"


def test_the_console_says_it_is_reconnecting_while_redis_restarts(tmp_path: Path) -> None:
    from tests.cluster_fixture import local_server

    with local_server() as server:
        console = ConsoleProc(server.url, "restart", tmp_path)
        try:
            with (
                chromium() as browser,
                httpx.Client(base_url=console.base, headers=BEARER, timeout=10) as api,
            ):
                page = browser.new_page()
                page.goto(f"{console.base}/?token={TOKEN}")
                page.goto(f"{console.base}/approvals")
                page.wait_for_selector("#live-status.ok", timeout=10_000)
                server.stop()
                page.wait_for_selector("#live-status.bad", timeout=10_000)
                assert "reconnecting" in page.inner_text("#live-status")
                down = api.get("/api/status")
                assert down.status_code == 503 and down.json()["reconnecting"] is True
                shown = page.goto(f"{console.base}/decisions")
                assert shown.status == 503
                text = page.inner_text("main")
                assert "Reconnecting" in text and "Traceback" not in page.content()
                server.start()  # the same port, empty
                wait_for(lambda: api.get("/api/status").status_code == 200, 20, "the API")
                page.wait_for_selector("h1:has-text('Decisions')", timeout=10_000)  # retried
                page.wait_for_selector("#live-status.ok", timeout=10_000)
        finally:
            console.stop()
