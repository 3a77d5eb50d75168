"""What the console reads from a decision log: single and batch entries, filters, newest
first, and the live feed's bound on a busy log."""

from __future__ import annotations

import redis

from hookbus.bus.decision_batch import DecisionRecord, encode_record, join_records
from hookbus.bus.keys import Keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Decision, HookRun, encode
from hookbus.console import data
from hookbus.console.live import READ_ENTRIES, Feed


def _fields(event_id: str, kind: str, outcome: str, agent: str, hook: str) -> dict[str, bytes]:
    run = HookRun(hook_id=hook, outcome="deny" if outcome == "deny" else "continue")
    decision = Decision(outcome=outcome, reason=f"{hook} said so", trace=[run])
    return {
        "id": event_id.encode(), "kind": kind.encode(), "outcome": outcome.encode(),
        "worker": b"w1", "entry": b"1-1", "degraded": b"0", "duration_us": b"12",
        "session": b"s1", "agent": agent.encode(), "d": encode(decision),
    }  # fmt: skip


def test_decisions_come_newest_first_from_single_and_batch_entries_and_filter(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    stream = Keys.for_namespace(namespace).decisions
    real_redis.xadd(stream, _fields("e1", "PreToolUse", "allow", "a1", "guard"))
    batch = [
        encode_record(DecisionRecord(**_fields(e, "PromptSubmit", o, "a2", h)))
        for e, o, h in (("e2", "deny", "pii"), ("e3", "allow", "router"))
    ]
    real_redis.xadd(stream, {"b": join_records(batch), "n": "2"})
    real_redis.xadd(stream, _fields("e4", "PreToolUse", "deny", "a1", "guard"))
    assert [r["id"] for r in data.decisions(settings)] == ["e4", "e3", "e2", "e1"]
    assert [r["id"] for r in data.decisions(settings, agent="a1")] == ["e4", "e1"]
    assert [r["id"] for r in data.decisions(settings, outcome="deny")] == ["e4", "e2"]
    assert [r["id"] for r in data.decisions(settings, kind="promptsubmit")] == ["e3", "e2"]
    assert [r["id"] for r in data.decisions(settings, hook="pii")] == ["e2"]
    assert [r["id"] for r in data.decisions(settings, limit=2)] == ["e4", "e3"]
    row = data.decisions(settings, limit=1)[0]
    assert row["reason"] == "guard said so" and row["trace"][0]["hook"] == "guard"


def test_the_live_feed_sends_each_new_decision_and_one_skipped_event_for_a_flood(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    stream = Keys.for_namespace(namespace).decisions
    real_redis.xadd(stream, _fields("old", "PreToolUse", "allow", "a", "g"))
    feed = Feed(settings)
    feed.start()
    assert feed.poll() == []  # what was there before is no news
    for n in range(2):
        real_redis.xadd(stream, _fields(f"n{n}", "PreToolUse", "deny", "a", "g"))
    assert [(kind, row["id"]) for kind, row in feed.poll()] == [
        ("decision", "n0"),
        ("decision", "n1"),
    ]
    for n in range(READ_ENTRIES + 5):
        real_redis.xadd(stream, _fields(f"f{n}", "PreToolUse", "allow", "a", "g"))
    assert feed.poll() == [("decision", {"partition": 0, "skipped": True})]
    real_redis.xadd(stream, _fields("after", "PreToolUse", "allow", "a", "g"))
    assert [row["id"] for _, row in feed.poll()] == ["after"]
