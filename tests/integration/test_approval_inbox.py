"""The approval inbox end to end on a real Redis, with a real chain worker process: an
``ask`` routed to the operator is parked, and ``hookbus approvals allow|deny`` (or the
library) answers the waiting SDK call, sync and async, with the operator's decision."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from hookbus import AsyncHookBus, HookBus
from hookbus.approvals.inbox import ApprovalInbox
from hookbus.bundles import history
from hookbus.bus.decision_batch import logged
from hookbus.bus.keys import Keys
from hookbus.bus.wire import Decision, Event
from hookbus.errors import ApprovalClosed
from tests.approval_helpers import (
    as_json,
    ask_payload,
    cli,
    parked,
    settings_for,
    start_worker,
    stop_worker,
    wait_alive,
    wait_for,
)


@pytest.fixture
def fleet(real_redis_url: str, real_redis: redis.Redis, namespace: str) -> Iterator[str]:
    """A chain worker whose asks go to the operator (30 s to decide)."""
    proc = start_worker(real_redis_url, namespace)
    try:
        wait_alive(real_redis, namespace, proc)
        yield namespace
    finally:
        stop_worker(proc)


def _request_in_thread(bus: HookBus, event: Event, out: list[Any], **kw: Any) -> threading.Thread:
    def run() -> None:
        started = time.monotonic()
        out.append(bus.request(event, **kw))
        out.append(time.monotonic() - started)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_an_ask_routed_to_the_operator_is_parked_and_allow_answers_the_sdk_call(
    real_redis_url: str, real_redis: redis.Redis, fleet: str
) -> None:
    settings = settings_for(real_redis_url, fleet)
    inbox = ApprovalInbox(settings)
    seen: list[Decision] = []
    out: list[Any] = []
    with HookBus.from_settings(settings) as bus:
        event = Event(kind="PreToolUse", agent_id="ci-7", session_id="s1", payload=ask_payload())
        thread = _request_in_thread(bus, event, out, deadline_ms=500, on_parked=seen.append)
        (item,) = parked(inbox)
        assert (item.agent, item.session, item.kind, item.tool) == (
            "ci-7",
            "s1",
            "PreToolUse",
            "Bash",
        )
        assert item.input == "rm -rf build"
        assert (item.hook, item.reason) == ("guard", "a person must look at this")
        assert item.expires_ms - item.asked_ms == 30_000
        time.sleep(0.6)  # past the request's own deadline: it still waits
        assert thread.is_alive()
        done = cli(
            real_redis_url,
            fleet,
            "approvals",
            "allow",
            item.id,
            "--reason",
            "looks fine",
            "--as",
            "ann",
        )
        assert done.returncode == 0, done.stderr
        assert f"{item.id} allowed by operator:ann" in done.stdout
        thread.join(10)
    decision, took = out
    assert decision.outcome == "allow" and not decision.degraded
    assert decision.reason == "allowed by operator:ann: looks fine"
    assert decision.approval is not None
    assert (decision.approval.id, decision.approval.state) == (item.id, "allowed")
    assert decision.approval.decided_by == "operator:ann"
    assert decision.approval.waited_ms is not None and decision.approval.waited_ms >= 600
    assert [d.approval.state for d in seen if d.approval] == ["pending"]
    assert seen[0].approval is not None and seen[0].approval.id == item.id
    assert took < 30
    # the decision log has the ask (parked) and the operator's answer; the history too
    stream = Keys.for_namespace(fleet).decisions

    def records() -> list[dict[bytes, bytes]]:
        rid = event.id.encode()
        return [r for r in logged(real_redis, stream) if r[b"id"] == rid]

    wait_for(lambda: len(records()) >= 2, what="both log records")
    assert [r[b"outcome"] for r in records()] == [b"ask", b"allow"]
    assert records()[1][b"worker"] == b"operator:ann"
    # both say what was asked, as the approval shows it
    assert [(r[b"tool"], r[b"input"]) for r in records()] == [(b"Bash", b"rm -rf build")] * 2
    entries = [e for e in history.read(real_redis, fleet) if e.action == "decide"]
    assert len(entries) == 1
    assert entries[0].actor == "operator:ann"
    assert entries[0].extra["approval"] == item.id
    assert entries[0].extra["outcome"] == "allow"
    assert entries[0].extra["waited_ms"] >= 600
    assert history.verify(real_redis, fleet).ok
    assert inbox.pending() == []
    assert [i.id for i in inbox.recent()] == [item.id]


def test_deny_answers_the_waiting_call_with_the_operators_reason(
    real_redis_url: str, fleet: str
) -> None:
    settings = settings_for(real_redis_url, fleet)
    inbox = ApprovalInbox(settings)
    out: list[Any] = []
    with HookBus.from_settings(settings) as bus:
        thread = _request_in_thread(
            bus, Event(kind="PermissionRequest", payload=ask_payload()), out
        )
        (item,) = parked(inbox)
        done = cli(
            real_redis_url, fleet, "approvals", "deny", item.id, "-r", "not on prod", "--json"
        )
        assert done.returncode == 0, done.stderr
        assert as_json(done.stdout)["state"] == "denied"
        thread.join(10)
    decision = out[0]
    assert decision.outcome == "deny" and not decision.degraded
    assert "not on prod" in (decision.reason or "")
    assert decision.approval.state == "denied"


def test_a_second_decision_is_refused_and_names_who_decided_first(
    real_redis_url: str, fleet: str
) -> None:
    settings = settings_for(real_redis_url, fleet)
    inbox = ApprovalInbox(settings)
    out: list[Any] = []
    with HookBus.from_settings(settings) as bus:
        thread = _request_in_thread(bus, Event(kind="PreToolUse", payload=ask_payload()), out)
        (item,) = parked(inbox)
        inbox.decide(item.id, "deny", who="bob")
        with pytest.raises(ApprovalClosed, match="already denied by operator:bob"):
            inbox.decide(item.id, "allow", who="ann")
        again = cli(real_redis_url, fleet, "approvals", "allow", item.id)
        assert again.returncode == 1
        assert "already denied by operator:bob" in again.stderr
        thread.join(10)
    assert out[0].outcome == "deny"


def test_two_operators_deciding_at_once_get_exactly_one_winner(
    real_redis_url: str, fleet: str
) -> None:
    settings = settings_for(real_redis_url, fleet)
    inbox = ApprovalInbox(settings)
    out: list[Any] = []
    with HookBus.from_settings(settings) as bus:
        thread = _request_in_thread(bus, Event(kind="PreToolUse", payload=ask_payload()), out)
        (item,) = parked(inbox)
        results: list[str] = []

        def decide(outcome: str, who: str) -> None:
            try:
                ApprovalInbox(settings).decide(item.id, outcome, who=who)
                results.append(f"won {who}")
            except ApprovalClosed:
                results.append(f"lost {who}")

        racers = [
            threading.Thread(target=decide, args=(o, w))
            for o, w in (("allow", "ann"), ("deny", "bob"), ("allow", "cy"), ("deny", "dee"))
        ]
        for racer in racers:
            racer.start()
        for racer in racers:
            racer.join(10)
        thread.join(10)
    assert sorted(r.split()[0] for r in results) == ["lost", "lost", "lost", "won"]
    winner = next(r.split()[1] for r in results if r.startswith("won"))
    assert out[0].approval.decided_by == f"operator:{winner}"


def test_the_async_client_waits_for_the_operator_too(real_redis_url: str, fleet: str) -> None:
    settings = settings_for(real_redis_url, fleet)
    inbox = ApprovalInbox(settings)

    async def scenario() -> tuple[Decision, Decision]:
        async with AsyncHookBus.from_settings(settings) as bus:
            waiting = asyncio.ensure_future(
                bus.request(Event(kind="PreToolUse", payload=ask_payload()), deadline_ms=300)
            )
            plain = await bus.request(Event(kind="PreToolUse", payload={"act": "none"}))
            items = await asyncio.to_thread(parked, inbox)
            await asyncio.sleep(0.4)
            assert not waiting.done()
            await asyncio.to_thread(inbox.decide, items[0].id, "allow", who="ann")
            return await asyncio.wait_for(waiting, 10), plain

    decision, plain = asyncio.run(scenario())
    assert plain.outcome == "allow" and plain.approval is None
    assert decision.outcome == "allow"
    assert decision.approval is not None and decision.approval.decided_by == "operator:ann"


@pytest.mark.timing
def test_the_answer_reaches_a_waiting_call_within_100_ms_of_the_decision(
    real_redis_url: str, fleet: str
) -> None:
    settings = settings_for(real_redis_url, fleet)
    inbox = ApprovalInbox(settings)
    lags = []
    with HookBus.from_settings(settings) as bus:
        for _ in range(5):
            out: list[Any] = []
            answered = threading.Event()

            def run(out: list[Any] = out, answered: threading.Event = answered) -> None:
                out.append(bus.request(Event(kind="PreToolUse", payload=ask_payload())))
                out.append(time.perf_counter())
                answered.set()

            thread = threading.Thread(target=run, daemon=True)
            thread.start()
            (item,) = parked(inbox)
            clicked = time.perf_counter()
            inbox.decide(item.id, "allow", who="ann")
            assert answered.wait(10)
            lags.append(out[1] - clicked)
            thread.join(5)
    assert sorted(lags)[2] < 0.1, lags
