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
from tests.console_helpers import TOKEN, ConsoleProc, chromium, screenshot

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


def _dead_event(client: redis.Redis, ns: str, session: str) -> str:
    """A dead event in the namespace's dead-letter stream, as a fan-out dispatcher leaves it."""
    from hookbus.bus.keys import Keys, dead_letters
    from hookbus.bus.wire import encode
    from hookbus.workers.fleet.dead_stream import dead_id

    event = Event(kind="PostToolUse", session_id=session, payload={"tool_name": "Bash"})
    entry = client.xadd(
        dead_letters(ns),
        {
            "stream": Keys.for_namespace(ns).events, "entry_id": "1-1", "group": "fanout",
            "deliveries": "6", "reason": "too many deliveries", "worker": "w1",
            "e": encode(event),
        },
    )  # fmt: skip
    return dead_id(0, entry)


def test_dead_letters_are_shown_requeued_and_purged_from_the_console(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    from hookbus.bus.keys import events

    first = _dead_event(real_redis, namespace, "s1")
    second = _dead_event(real_redis, namespace, "s2")
    console = ConsoleProc(real_redis_url, namespace, tmp_path)
    try:
        with httpx.Client(base_url=console.base, headers=BEARER, timeout=10) as api:
            listed = api.get("/api/dead").json()
            assert listed["total"] == 2
            status = api.get("/api/status").json()
            assert status["dead_letters"] == 2
            assert status["dead_letters_parts"] == {"stream": 2, "jobs": 0}
            dead_rows = [s for s in status["streams"] if s["name"] == "dead letters"]
            assert sum(s["length"] for s in dead_rows) == status["dead_letters_parts"]["stream"]
            assert {j["id"] for j in listed["jobs"]} == {first, second}
            shown = api.get(f"/api/dead/{first}").json()
            assert shown["meta"]["reason"] == "too many deliveries"
            assert shown["events_data"][0]["session_id"] == "s1"
            assert api.get("/api/dead/dl-9-9").status_code == 404
            assert api.post(f"/api/dead/{first}/requeue").json()["ok"] is True
            assert real_redis.xlen(events(namespace)) == 1  # published again
            with chromium() as browser:
                page = browser.new_page()
                page.goto(f"{console.base}/?token={TOKEN}")
                page.goto(f"{console.base}/dead/{second}")  # readable, not raw JSON
                assert page.inner_text("dd.error") == "too many deliveries"
                facts = page.inner_text("article.dead")
                assert "s2" in facts and "Bash" in facts and "PostToolUse" in facts
                assert not page.is_visible("pre.json")  # the raw JSON waits behind a click
                screenshot(page, "dead-letter")
                page.goto(f"{console.base}/dead")
                row = page.wait_for_selector(f'tr[data-dead="{second}"]')
                screenshot(page, "dead-letters")
                assert "too many deliveries" in row.inner_text()
                row.query_selector("button[data-dead-action=purge]").click()
                page.wait_for_selector("text=purged", timeout=5_000)
                page.goto(f"{console.base}/dead/{first}")
                assert page.query_selector("h1") is not None
            assert api.get("/api/dead").json()["total"] == 0
    finally:
        console.stop()


def test_the_overview_names_a_hook_at_its_concurrency_cap(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    import json
    import time

    from hookbus.bus.keys import workers

    beat = {
        "id": "chain-x", "role": "chain", "last_ms": int(time.time() * 1000),
        "started_ms": int(time.time() * 1000) - 5000, "concurrency": 4,
        "hooks_at_cap": {"slow-guard": {"abandoned": 8, "cap": 8, "refused": 3}},
        "hook_failures": {"slow-guard": {"timeout": 11}},
    }  # fmt: skip
    real_redis.hset(workers(namespace), "chain-x", json.dumps(beat))
    console = ConsoleProc(real_redis_url, namespace, tmp_path)
    try:
        page = httpx.get(f"{console.base}/", headers=BEARER, timeout=10)
    finally:
        console.stop()
    text = " ".join(page.text.split())
    assert page.status_code == 200
    assert "at cap</span> slow-guard: 8/8 hung, 3 refused" in text
    assert "failing</span> slow-guard: 11 timeout" in text
