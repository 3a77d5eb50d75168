"""A request observer that dies (or stalls) between reading the decision log and forwarding:
another observer reclaims its entries and forwards each request once; the stalled one's late
forward adds nothing (``observe_forward.lua`` forwards only what its XACK won). On the real
Redis, with the decision log and request stream a chain worker would have written."""

from __future__ import annotations

import time
from typing import Any

import redis

from hookbus.bus.decision_batch import DecisionRecord, encode_record, join_records
from hookbus.bus.keys import OBSERVE_GROUP, Keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Decision, Event, HookRun, decode, encode
from hookbus.workers.fanout.observer import RequestObserver


class Observes:
    def observes(self, kind: str) -> bool:
        return kind == "PreToolUse"


def _answer(client: redis.Redis, keys: Keys, n: int) -> list[str]:
    """``n`` answered PreToolUse requests and one Stop nobody observes, as a chain worker
    leaves them: the requests in the request stream, one batch entry in the decision log."""
    records, ids = [], []
    for i in range(n + 1):
        kind = "PreToolUse" if i < n else "Stop"
        event = Event(kind=kind, session_id=f"s{i}", payload={"tool_name": "Bash", "i": i})
        entry = client.xadd(keys.requests, {b"e": encode(event)})
        decision = Decision(
            outcome="deny" if i == 0 else "allow",
            reason="no" if i == 0 else None,
            trace=[HookRun(hook_id="guard", outcome="deny" if i == 0 else "continue")],
            request_id=event.id,
        )
        records.append(
            encode_record(
                DecisionRecord(
                    id=event.id.encode(),
                    kind=kind.encode(),
                    outcome=decision.outcome.encode(),
                    worker=b"w1",
                    entry=entry if isinstance(entry, bytes) else str(entry).encode(),
                    degraded=b"0",
                    duration_us=b"10",
                    session=f"s{i}".encode(),
                    agent=b"",
                    d=encode(decision),
                )
            )
        )
        ids.append(event.id)
    client.xadd(keys.decisions, {b"b": join_records(records), b"n": len(records)})
    return ids[:n]


def _forwarded(client: redis.Redis, keys: Keys) -> list[Event]:
    entries: Any = client.xrange(keys.events)
    return [decode(fields[b"e"], Event) for _, fields in entries]


def test_a_stalled_observers_entries_are_forwarded_once_by_another(
    real_redis: redis.Redis, namespace: str
) -> None:
    settings = Settings(namespace=namespace)
    keys = Keys.for_namespace(namespace)
    stalled = RequestObserver(settings, Observes(), stream=real_redis, consumer="stalled")
    rescuer = RequestObserver(
        settings, Observes(), stream=real_redis, consumer="rescuer", claim_min_idle_ms=50
    )
    stalled.ensure_group()
    observed = _answer(real_redis, keys, 3)
    # the stalled observer reads the entry, then stops before forwarding it
    read: Any = real_redis.xreadgroup(OBSERVE_GROUP, "stalled", {keys.decisions: ">"}, count=10)
    entries = read[0][1]
    assert len(entries) == 1 and _forwarded(real_redis, keys) == []
    time.sleep(0.1)  # past the rescuer's claim_min_idle_ms
    assert rescuer.step() == 1  # reclaimed and forwarded
    assert stalled.handle(entries) == 1  # its late forward: XACK lost, nothing added
    assert rescuer.step() == 0
    events = _forwarded(real_redis, keys)
    assert sorted(e.id for e in events) == sorted(observed)  # once each; the Stop not at all
    first = next(e for e in events if e.id == observed[0])
    assert first.meta["decision"] == {
        "outcome": "deny",
        "reason": "no",
        "hook": "guard",
        "degraded": False,
        "worker": "w1",
        "request_id": observed[0],
    }
    assert first.reply_to is None and first.budget_ms is None
    assert (rescuer.forwarded, stalled.forwarded) == (3, 0)
    assert real_redis.xpending(keys.decisions, OBSERVE_GROUP)["pending"] == 0


def test_a_request_trimmed_before_its_observer_read_the_log_is_counted_missed(
    real_redis: redis.Redis, namespace: str
) -> None:
    settings = Settings(namespace=namespace)
    keys = Keys.for_namespace(namespace)
    observer = RequestObserver(settings, Observes(), stream=real_redis)
    observer.ensure_group()
    _answer(real_redis, keys, 2)
    real_redis.xtrim(keys.requests, maxlen=0)
    assert observer.step() == 1
    assert _forwarded(real_redis, keys) == []
    assert (observer.forwarded, observer.missed) == (0, 2)
    assert real_redis.xpending(keys.decisions, OBSERVE_GROUP)["pending"] == 0


def test_hook_run_records_of_fan_out_jobs_and_packs_are_not_forwarded(
    real_redis: redis.Redis, namespace: str
) -> None:
    settings = Settings(namespace=namespace)
    keys = Keys.for_namespace(namespace)
    observer = RequestObserver(settings, Observes(), stream=real_redis)
    observer.ensure_group()
    run = {"type": b"hook_run", "hook": b"audit", "id": b"e1", "kind": b"PreToolUse"}
    real_redis.xadd(keys.decisions, {k: v for k, v in run.items()})  # a single job's entry
    real_redis.xadd(  # a pack's batch entry
        keys.decisions, {b"b": join_records([encode_record(run), encode_record(run)]), b"n": 2}
    )
    assert observer.step() == 2
    assert _forwarded(real_redis, keys) == []
    assert (observer.forwarded, observer.missed) == (0, 0)
    assert real_redis.xpending(keys.decisions, OBSERVE_GROUP)["pending"] == 0
