"""`hookbus replay` counts only requests and credits each change to the hook that decided it.

The decision log holds the chain workers' decisions and the fan-out jobs' ``hook_run``
records side by side; only the decisions are requests to replay. A change is credited to the
candidate's deciding hook with that hook's own reason, and an allow nobody stopped is
credited to no hook (the recorded decider is kept as ``was_hook`` / ``was_reason``)."""

from __future__ import annotations

from typing import Any

import fakeredis

from hookbus.bus.keys import ENTRY_FIELD, Keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.tail import Target
from hookbus.bus.wire import Decision, Event, HookResult, HookRun, encode
from hookbus.cli.fleet.replay import credit
from hookbus.hooks.registry import HookRegistry
from hookbus.workers.replay import count_entries, replay

NS = "replay-credit"


def _guard(word: str, reason: str) -> Any:
    def guard(event: Event) -> HookResult | None:
        if word in event.payload.get("command", ""):
            return HookResult(outcome="deny", reason=reason)
        return None

    return guard


def _record(client: fakeredis.FakeRedis, keys: Keys, command: str, decision: Decision) -> None:
    """A request in the request stream and its decision in the log, as a worker leaves them."""
    event = Event(kind="PreToolUse", payload={"command": command})
    entry = client.xadd(keys.requests, {ENTRY_FIELD: encode(event)})
    client.xadd(
        keys.decisions,
        {
            "id": event.id,
            "kind": "PreToolUse",
            "outcome": decision.outcome,
            "entry": entry,
            "degraded": "0",
            "d": encode(decision),
        },
    )


def _hook_run(client: fakeredis.FakeRedis, keys: Keys, hook: str) -> None:
    """A fan-out job's record: a hook that ran on an event, not an answered request."""
    fields = {"type": "hook_run", "hook": hook, "id": "e1", "kind": "PostToolUse"}
    client.xadd(keys.decisions, {**fields, "outcome": "continue", "events": "1"})


def test_fan_out_records_are_not_requests_and_changes_credit_the_deciding_hook(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    keys = Keys.for_namespace(NS)
    recorded_deny = Decision(
        outcome="deny",
        reason="no recursive deletes",
        trace=[
            HookRun(hook_id="no-rm-rf", outcome="deny"),
            HookRun(hook_id="later", outcome="skipped"),
        ],
    )
    _record(fake_redis, keys, "rm -rf /", recorded_deny)
    _hook_run(fake_redis, keys, "audit-log")
    _record(fake_redis, keys, "cat .env", Decision(outcome="allow"))
    _hook_run(fake_redis, keys, "audit-log")
    _record(fake_redis, keys, "ls", Decision(outcome="allow"))

    registry = HookRegistry.from_settings(Settings(namespace=NS))
    # the candidate: no rm guard any more; a dotenv guard, then a hook that lets all through
    registry.register(
        "no-dotenv", _guard(".env", "secrets stay unread"), events="PreToolUse", priority=10
    )
    registry.register("passes", lambda event: None, events="PreToolUse", priority=20)
    try:
        parts = [Target(fake_redis, keys)]
        assert count_entries(parts, 0, None) == 3
        report = replay(parts, registry, since_ms=0)
    finally:
        registry.close()

    assert (report.replayed, report.missing, report.degraded) == (3, 0, 0)
    flipped, denied = report.changed
    assert (flipped.before, flipped.after) == ("deny", "allow")
    assert (flipped.hook, flipped.reason) == (None, None)  # no candidate hook stopped it
    assert (flipped.was_hook, flipped.was_reason) == ("no-rm-rf", "no recursive deletes")
    assert (denied.before, denied.after) == ("allow", "deny")
    assert (denied.hook, denied.reason) == ("no-dotenv", "secrets stay unread")
    assert (denied.was_hook, denied.was_reason) == (None, None)
    assert credit(flipped) == "(no hook stops it; was no-rm-rf: no recursive deletes)"
    assert credit(denied) == "by no-dotenv (secrets stay unread)"


def _slow(event: Event) -> None:
    import time

    time.sleep(0.3)


def test_a_hook_that_hit_its_deadline_is_reported_apart_never_as_a_change(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    keys = Keys.for_namespace(NS)
    # recorded: the guard answered in time and allowed; replayed on a loaded machine it
    # overruns its timeout, so its on_error ("deny") answers instead
    _record(fake_redis, keys, "ls", Decision(outcome="allow"))
    registry = HookRegistry.from_settings(Settings(namespace=NS))
    registry.register("slow", _slow, events="PreToolUse", on_error="deny", timeout_s=0.05)
    try:
        first = replay([Target(fake_redis, keys)], registry, since_ms=0)
    finally:
        registry.close()

    assert first.replayed == 1
    assert first.changed == []
    (timed_out,) = first.timed_out
    assert (timed_out.before, timed_out.after, timed_out.hook) == ("allow", "deny", "slow")
    assert [c["request_id"] for c in first.to_dict()["timed_out"]] == [timed_out.request_id]
