"""The console in a real Chromium: log in with the token, watch a pending approval appear
live and press Allow (the waiting agent call returns allow), approve an agent-written hook
from the Hooks page, see a decision within a second. Measures nothing; asserts timings
loosely enough for a loaded 2-core machine."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from hookbus import HookBus
from hookbus.bus.wire import Event
from tests.approval_helpers import (
    ask_payload,
    settings_for,
    start_worker,
    stop_worker,
    wait_alive,
    wait_for,
)
from tests.console_helpers import TOKEN, ConsoleProc, chromium, screenshot

PENDING_HOOK = """\
name = "no-force-push"
description = "Refuse git push --force"
author = "agent:claude-7"
events = ["PreToolUse"]

[match]
tools = ["Bash"]
pattern = "git push .*--force"
field = "tool_input.command"

[action.prompt_inject]
content = "Never force-push."
"""


@pytest.fixture
def fleet(real_redis_url: str, real_redis: redis.Redis, namespace: str) -> Iterator[str]:
    proc = start_worker(real_redis_url, namespace)
    try:
        wait_alive(real_redis, namespace, proc)
        yield namespace
    finally:
        stop_worker(proc)


@pytest.fixture
def console(real_redis_url: str, fleet: str, tmp_path: Path) -> Iterator[ConsoleProc]:
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    proc = ConsoleProc(real_redis_url, fleet, hooks)
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def page(console: ConsoleProc) -> Iterator[Any]:
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        page = context.new_page()
        page.goto(f"{console.base}/?token={TOKEN}")
        assert page.url == f"{console.base}/"  # the token left the address bar
        yield page
        context.close()


def test_a_pending_approval_appears_live_and_allow_answers_the_waiting_agent(
    real_redis_url: str, fleet: str, console: ConsoleProc, page: Any
) -> None:
    page.goto(f"{console.base}/approvals")
    page.wait_for_selector("#live-status.ok", timeout=10_000)
    out: list[Any] = []
    with HookBus.from_settings(settings_for(real_redis_url, fleet)) as bus:

        def ask() -> None:
            event = Event(
                kind="PreToolUse", agent_id="ci-7", session_id="s-42",
                payload=ask_payload("terraform destroy -auto-approve"),
            )  # fmt: skip
            out.append(bus.request(event))
            out.append(time.perf_counter())

        thread = threading.Thread(target=ask, daemon=True)
        thread.start()
        item = page.wait_for_selector("[data-approval]", timeout=10_000)  # no reload
        assert "terraform destroy" in item.inner_text()
        screenshot(page, "approvals")
        item.query_selector("input.reason").fill("planned teardown")
        clicked = time.perf_counter()
        item.query_selector("button[data-decide=allow]").click()
        thread.join(10)
        page.wait_for_selector("text=allowed by operator:ann", timeout=5_000)
    decision, answered = out
    assert decision.outcome == "allow"
    assert decision.reason == "allowed by operator:ann: planned teardown"
    assert decision.approval.decided_by == "operator:ann"
    assert answered - clicked < 2.0
    page.wait_for_selector("tr.state-allowed", timeout=5_000)


def test_a_reason_half_typed_keeps_its_text_caret_and_focus_when_another_approval_arrives(
    real_redis_url: str, fleet: str, console: ConsoleProc, page: Any
) -> None:
    page.goto(f"{console.base}/approvals")
    page.wait_for_selector("#live-status.ok", timeout=10_000)
    with HookBus.from_settings(settings_for(real_redis_url, fleet)) as bus:

        def ask(command: str) -> None:
            event = Event(kind="PreToolUse", agent_id="ci-7", payload=ask_payload(command))
            bus.request(event)

        for command in ("terraform destroy -auto-approve", "kubectl delete ns prod"):
            threading.Thread(target=ask, args=(command,), daemon=True).start()
            if command.startswith("terraform"):
                first = page.wait_for_selector("[data-approval]", timeout=10_000)
                reason = first.query_selector("input.reason")
                reason.click()
                page.keyboard.type("planned tear")
                page.keyboard.press("ArrowLeft")
        page.wait_for_selector("text=kubectl delete ns prod", timeout=10_000)
        time.sleep(0.3)  # a second refresh, with nothing new, leaves it as it is too
        assert first.evaluate("e => e.isConnected"), "the refresh replaced the item being read"
        assert reason.input_value() == "planned tear"
        assert reason.evaluate("e => document.activeElement === e"), "the refresh took the focus"
        assert reason.evaluate("e => [e.selectionStart, e.selectionEnd]") == [11, 11]
        page.keyboard.type("x")  # typing goes on where it was
        assert reason.input_value() == "planned teaxr"
        for item in page.query_selector_all("[data-approval]"):
            item.query_selector("button[data-decide=deny]").click()


def test_a_decision_made_by_a_request_shows_on_the_decisions_page_within_a_second(
    real_redis_url: str, fleet: str, console: ConsoleProc, page: Any
) -> None:
    page.goto(f"{console.base}/decisions")
    page.wait_for_selector("#live-status.ok", timeout=10_000)
    event = Event(kind="PreToolUse", agent_id="ci-9", payload={"act": "deny", "tool_name": "Bash"})
    with HookBus.from_settings(settings_for(real_redis_url, fleet)) as bus:
        decision = bus.request(event)
        sent = time.monotonic()
    assert decision.outcome == "deny"
    page.wait_for_selector(f'tr[data-request="{event.id}"]', timeout=5_000)
    took = time.monotonic() - sent
    # the decision log is written up to 0.1 s after the answer; the page polls 5 times a
    # second: well under a second on an idle machine, 2.5 s tolerated under CI load
    assert took < 2.5, took
    page.click(f'tr[data-request="{event.id}"] summary')
    assert "guard" in page.inner_text(f'tr[data-request="{event.id}"] table.trace')


def test_a_denied_command_shows_its_tool_command_and_deciding_hook_without_expanding(
    real_redis_url: str, fleet: str, console: ConsoleProc, page: Any
) -> None:
    page.goto(f"{console.base}/decisions")
    page.wait_for_selector("#live-status.ok", timeout=10_000)
    payload = {"act": "deny", "tool_name": "Bash", "tool_input": {"command": "rm -rf /"}}
    event = Event(kind="PreToolUse", agent_id="ci-7", payload=payload)
    with HookBus.from_settings(settings_for(real_redis_url, fleet)) as bus:
        assert bus.request(event).outcome == "deny"
    row = f'tr[data-request="{event.id}"]'
    page.wait_for_selector(row, timeout=5_000)
    for cell, shown in (("td.tool", "Bash"), ("td.input", "rm -rf /"), ("td.hook", "guard")):
        assert page.is_visible(f"{row} {cell}"), cell
        assert page.inner_text(f"{row} {cell}").strip() == shown
    assert page.is_visible(f"{row} >> text=ci-7")  # the agent that asked
    assert not page.is_visible(f"{row} pre.whole-input")  # the whole input waits for a click
    page.click(f"{row} summary")
    assert page.inner_text(f"{row} pre.whole-input") == "rm -rf /"
    screenshot(page, "decisions")


def test_a_pending_agent_hook_is_approved_from_the_hooks_page_and_reaches_the_next_reload(
    real_redis_url: str, real_redis: redis.Redis, fleet: str, console: ConsoleProc, page: Any,
    tmp_path: Path,
) -> None:  # fmt: skip
    from hookbus.authoring.release import release_folder
    from hookbus.bundles import history

    hooks = tmp_path / "hooks"
    folder = hooks / ".pending" / "no-force-push"
    folder.mkdir(parents=True)
    (folder / "HOOK.toml").write_text(PENDING_HOOK)
    page.goto(f"{console.base}/hooks")
    card = page.wait_for_selector('[data-hook="no-force-push"]')
    assert "agent:claude-7" in card.inner_text()
    assert '+name = "no-force-push"' in card.inner_text()  # the diff: all new
    screenshot(page, "hooks")
    card.query_selector("button[data-hook-decide=approve]").click()
    page.wait_for_selector("text=approved: the next reload publishes it", timeout=5_000)
    assert (hooks / "no-force-push" / "HOOK.toml").is_file()
    settings = settings_for(real_redis_url, fleet)
    release_folder(real_redis, settings, hooks, signing_key=None)
    page.reload()
    page.wait_for_selector("ul.bundle-hooks li:has-text('no-force-push')", timeout=5_000)
    assert not page.query_selector('[data-hook="no-force-push"]')
    actions = [(e.action, e.actor, e.hook) for e in history.read(real_redis, fleet)]
    assert ("approve", "operator:ann", "no-force-push") in actions


def test_the_overview_chart_grows_live_as_requests_arrive_and_follows_the_range(
    real_redis_url: str, fleet: str, console: ConsoleProc, page: Any
) -> None:
    page.goto(f"{console.base}/")
    page.wait_for_selector("#live-status.ok", timeout=10_000)
    chart = "#activity"
    before = int(page.get_attribute(chart, "data-total") or "0")
    with HookBus.from_settings(settings_for(real_redis_url, fleet)) as bus:
        for act in ("deny", "deny", "allow"):
            bus.request(Event(kind="PreToolUse", payload={"act": act, "tool_name": "Bash"}))
    wait_for(  # the page's own refresh, no reload: the stream said decisions came
        lambda: int(page.get_attribute(chart, "data-total") or "0") >= before + 3,
        10,
        "the chart's total to grow",
    )
    assert page.locator(f"{chart} svg.bars rect.o-deny").count() >= 1  # drawn, not just counted
    assert page.get_attribute(chart, "data-range") == "15m"
    page.click(f"{chart} nav.ranges >> text=24h")
    page.wait_for_selector(f'{chart}[data-range="24h"]', timeout=5_000)
    assert "last 24h" in page.inner_text(f"{chart} h2")
    assert int(page.get_attribute(chart, "data-total") or "0") >= before + 3
    screenshot(page, "overview-chart")


def test_the_overview_shows_workers_and_pending_approvals(console: ConsoleProc, page: Any) -> None:
    page.goto(f"{console.base}/")
    text = page.inner_text("main")
    assert "alive" in text and "Pending approvals" in text
    screenshot(page, "overview")


def test_without_the_token_every_page_and_api_call_is_refused(console: ConsoleProc) -> None:
    import httpx

    paths = ["/", "/decisions", "/approvals", "/hooks", "/dead", "/dead/x", "/nowhere",
             "/api/status", "/api/decisions", "/api/approvals", "/api/hooks", "/api/dead",
             "/api/stream", "/api/nowhere"]  # fmt: skip
    with httpx.Client(base_url=console.base, timeout=5) as client:
        for path in paths:
            assert client.get(path).status_code == 401, path
            assert (
                client.get(path, headers={"Authorization": "Bearer wrong-token-123456"}).status_code
                == 401
            )
        for path in ["/api/approvals/abcdefabcdef", "/api/hooks/x/approve", "/api/dead/x/purge"]:
            assert client.post(path, json={"decision": "allow"}).status_code == 401, path
        assert client.get("/?token=wrong").status_code == 401
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        assert client.get("/api/status", headers=bearer).status_code == 200
        assert client.get("/approvals", headers=bearer).status_code == 200
        # a logged-in browser session still needs the page's CSRF token to change anything
        login = client.get(f"/?token={TOKEN}", follow_redirects=False)
        assert login.status_code == 303
        cookie = login.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie
        assert client.get("/api/approvals").status_code == 200
        refused = client.post("/api/approvals/abcdefabcdef", json={"decision": "allow"})
        assert refused.status_code == 403


def test_the_browser_without_a_login_sees_only_the_login_page(console: ConsoleProc) -> None:
    with chromium() as browser:
        page = browser.new_page()
        response = page.goto(f"{console.base}/approvals")
        assert response.status == 401
        assert page.query_selector("input[name=token]")
        page.fill("input[name=token]", TOKEN)
        page.click("button[type=submit]")
        page.goto(f"{console.base}/approvals")
        assert page.query_selector("h1").inner_text().startswith("Approvals")
        wait_for(lambda: page.query_selector("#live-status.ok"), 10, "the live stream")
