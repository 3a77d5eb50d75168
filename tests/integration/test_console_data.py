"""What the console reads from a decision log: single and batch entries, filters, newest
first, and the live feed's bound on a busy log."""

from __future__ import annotations

import redis

from hookbus.bus.decision_batch import DecisionRecord, encode_record, join_records
from hookbus.bus.keys import Keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Approval, Decision, Event, HookRun, encode
from hookbus.console import charts, decision_log
from hookbus.console.live import READ_ENTRIES, Feed
from hookbus.workers.unguarded.report import record_unguarded


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
    assert [r["id"] for r in decision_log.decisions(settings)] == ["e4", "e3", "e2", "e1"]
    assert [r["id"] for r in decision_log.decisions(settings, agent="a1")] == ["e4", "e1"]
    assert [r["id"] for r in decision_log.decisions(settings, outcome="deny")] == ["e4", "e2"]
    assert [r["id"] for r in decision_log.decisions(settings, kind="promptsubmit")] == ["e3", "e2"]
    assert [r["id"] for r in decision_log.decisions(settings, hook="pii")] == ["e2"]
    assert [r["id"] for r in decision_log.decisions(settings, limit=2)] == ["e4", "e3"]
    row = decision_log.decisions(settings, limit=1)[0]
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


def test_rows_say_what_was_asked_and_which_hook_decided_and_fanout_runs_list_apart(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    stream = Keys.for_namespace(namespace).decisions
    asked = {**_fields("d1", "PreToolUse", "deny", "a1", "guard"), "duration_us": b"2500"}
    real_redis.xadd(stream, {**asked, "tool": b"Bash", "input": b"rm -rf /"})
    real_redis.xadd(stream, {"type": b"hook_run", "hook": b"audit-log", "id": b"f1",
                             "kind": b"PostToolUse", "outcome": b"error", "error": b"boom",
                             "duration_us": b"40"})  # fmt: skip
    [row] = decision_log.decisions(settings)
    assert (row["tool"], row["input"], row["hook"], row["ms"]) == ("Bash", "rm -rf /", "guard", 2.5)
    assert row["source"] == "chain" and row["agent"] == "a1"
    [run] = decision_log.decisions(settings, source="fanout")
    assert (run["id"], run["hook"], run["reason"]) == ("f1", "audit-log", "boom")
    assert [r["id"] for r in decision_log.decisions(settings, source="all")] == ["f1", "d1"]
    assert decision_log.decisions(settings, hook="guard")[0]["id"] == "d1"


def test_an_answered_ask_shows_its_answer_and_older_rows_page_back(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    stream = Keys.for_namespace(namespace).decisions
    for n in range(5):
        real_redis.xadd(stream, _fields(f"old{n}", "PreToolUse", "deny", "a", "guard"))
    pending = Decision(outcome="ask", approval=Approval(id="ap1", state="pending"))
    answer = Decision(
        outcome="allow", approval=Approval(id="ap1", state="allowed", decided_by="op:ana")
    )
    real_redis.xadd(stream, {**_fields("q1", "PreToolUse", "ask", "a", "g"), "d": encode(pending)})
    real_redis.xadd(stream, {**_fields("q1", "PreToolUse", "allow", "a", "g"), "d": encode(answer)})
    newest = decision_log.decisions(settings, limit=3)
    assert [(r["id"], r["outcome"]) for r in newest] == [
        ("q1", "allow"),
        ("q1", "ask"),
        ("old4", "deny"),
    ]
    assert newest[1]["approval"]["state"] == "allowed"  # no longer "pending"
    assert newest[1]["approval"]["decided_by"] == "op:ana"
    older = decision_log.decisions(settings, limit=3, before=newest[-1]["entry"])
    assert [r["id"] for r in older] == ["old3", "old2", "old1"]
    assert decision_log.decisions(settings, before="not-an-id")[0]["id"] == "q1"  # ignored


def test_a_log_of_large_batches_is_read_only_to_the_bound(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    stream = Keys.for_namespace(namespace).decisions
    record = encode_record(DecisionRecord(**_fields("b", "PreToolUse", "deny", "a", "guard")))
    for _ in range(12):  # 6,144 decisions, 512 to an entry, as a busy worker's ledger writes
        real_redis.xadd(stream, {"b": join_records([record] * 512), "n": "512"})
    rows = list(decision_log.newest(settings, 0, page=decision_log.LARGE_READ))
    assert len(rows) == decision_log.SCAN_RECORDS
    chart = charts.activity(settings, "15m")
    assert chart["total"] == decision_log.SCAN_RECORDS and chart["truncated"]


def test_the_operator_chart_counts_unguarded_calls_and_approval_waits_in_range(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    keys = Keys.for_namespace(namespace)
    day_ago = Event(kind="PostToolUse", ts=1_000, payload={"tool_name": "Bash"})
    now = [Event(kind="PostToolUse", agent_id="a", payload={"tool_name": "Bash"})] * 2
    record_unguarded(real_redis, keys, [day_ago, *now])
    for waited in (2_000, 4_000, 9_000):
        answer = Decision(
            outcome="allow",
            approval=Approval(id=f"ap{waited}", state="allowed", waited_ms=waited),
        )
        real_redis.xadd(keys.decisions, {**_fields("q", "PreToolUse", "allow", "a", "g"),
                                         "d": encode(answer)})  # fmt: skip
    op = charts.activity(settings, "15m")["operator"]
    assert (op["unguarded"], op["answered"], op["longest_wait_s"]) == (2, 3, 4.0)
    assert len(op["unguarded_bars"]) == 1 and len(op["wait_p50"]) == 1
