"""A parked request whose approval vanished from Redis (restarted empty, failed over,
flushed) learns it within a couple of seconds and gets the failure policy's answer with the
true reason, instead of waiting out its whole ``wait_s`` for a decision nobody can make: the
sync SDK, the asyncio SDK and the per-event Claude Code hook, on the real Redis."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from hookbus import AsyncHookBus, HookBus
from hookbus.approvals.inbox import ApprovalInbox
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event
from tests.acl_helpers import NS, acl_redis
from tests.approval_helpers import (
    ask_payload,
    claude_event,
    finish,
    parked,
    settings_for,
    start_hook,
    start_worker,
    stop_worker,
    wait_alive,
    wait_for,
)
from tests.wiped_helpers import wipe_namespace

GONE = "its approval is gone from Redis before an operator decided"


@pytest.fixture
def fleet(real_redis_url: str, real_redis: redis.Redis, namespace: str) -> Iterator[str]:
    proc = start_worker(real_redis_url, namespace, wait_s=60)
    try:
        wait_alive(real_redis, namespace, proc)
        yield namespace
    finally:
        stop_worker(proc)


def test_a_parked_request_whose_approval_vanished_is_answered_within_two_seconds(
    real_redis_url: str, real_redis: redis.Redis, fleet: str
) -> None:
    settings = settings_for(real_redis_url, fleet)
    answers: dict[str, Any] = {}
    done: dict[str, float] = {}

    async def ask_async() -> Any:
        async with AsyncHookBus.from_settings(settings) as abus:
            return await abus.request(Event(kind="PreToolUse", payload=ask_payload("async")))

    def run(name: str, call: Any) -> None:
        answers[name] = call()
        done[name] = time.monotonic()

    with HookBus.from_settings(settings) as bus:

        def ask_sync() -> Any:
            return bus.request(Event(kind="PreToolUse", payload=ask_payload("sync")))

        threads = [
            threading.Thread(target=run, args=("sync", ask_sync), daemon=True),
            threading.Thread(
                target=run, args=("aio", lambda: asyncio.run(ask_async())), daemon=True
            ),
        ]
        for thread in threads:
            thread.start()
        hook = start_hook(
            real_redis_url, fleet, claude_event("PreToolUse", "ASK_ME x"), "--timeout", "90"
        )
        parked(ApprovalInbox(settings), 3)
        wiped = time.monotonic()
        assert wipe_namespace(real_redis, fleet) > 0
        code, out, err = finish(hook, 30)
        done["hook"] = time.monotonic()
        for thread in threads:
            thread.join(30)
    for name in ("sync", "aio"):
        decision = answers[name]
        assert (decision.outcome, decision.degraded) == ("deny", True), (name, decision)
        assert GONE in decision.reason and decision.reason.endswith("policy deny"), decision.reason
        assert decision.approval is not None and decision.approval.state == "expired"
    assert code == 0, err
    specific = out["hookSpecificOutput"]
    assert specific["permissionDecision"] == "deny", out
    assert GONE in specific["permissionDecisionReason"], out
    late = {name: round(at - wiped, 2) for name, at in done.items() if at - wiped > 2.5}
    assert not late, late


def test_under_the_shipped_acl_a_redis_restarted_empty_answers_the_parked_request(
    tmp_path: Path,
) -> None:
    with acl_redis(tmp_path) as server:
        worker = start_worker(server.url("hookbus-worker"), NS, wait_s=60)
        producer = Settings(redis_url=server.url("hookbus-producer"), namespace=NS)
        inbox = ApprovalInbox(Settings(redis_url=server.url("hookbus-operator"), namespace=NS))
        answers: list[Any] = []
        try:
            with HookBus.from_settings(producer) as bus:
                wait_for(bus.workers_alive, 20, "the worker under its ACL user")
                event = Event(kind="PreToolUse", payload=ask_payload("terraform apply"))
                thread = threading.Thread(
                    target=lambda: answers.append(bus.request(event)), daemon=True
                )
                thread.start()
                parked(inbox)
                server.restart_empty()
                restarted = time.monotonic()
                thread.join(30)
                took = time.monotonic() - restarted
        finally:
            stop_worker(worker)
    (decision,) = answers
    assert (decision.outcome, decision.degraded) == ("deny", True), decision
    assert GONE in decision.reason, decision.reason
    assert took < 3.0, took
