"""The fan-out's watch on a real Redis: a post event whose call left no mark is recorded
and counted once its grace has passed; a marked call never is; one ZMSCORE looks up
every call that came due."""

from __future__ import annotations

import redis

from hookbus.bus.keys import Keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.settings.sections import UnguardedSettings
from hookbus.bus.wire import Event
from hookbus.state.notices import live_notices
from hookbus.workers.chain.ledger import AckLedger
from hookbus.workers.unguarded import report
from hookbus.workers.unguarded.marks import guarded_names
from hookbus.workers.unguarded.react import UnguardedReaction
from hookbus.workers.unguarded.watch import UnguardedWatch


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def call(kind: str, call_id: str, *, agent: str = "a1", session: str = "s1") -> Event:
    return Event(
        kind=kind,
        session_id=session,
        agent_id=agent,
        payload={"tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": call_id},
        meta={"harness": "claude-code"},
    )


def mark(client: redis.Redis, keys: Keys, *events: Event) -> None:
    """What a chain worker does when it answers these guard requests."""
    ledger = AckLedger(client, keys, consumer="w1", decisions_maxlen=1_000)
    for event in events:
        ledger.mark(guarded_names(event))
    ledger.flush()


def test_a_call_with_no_mark_is_recorded_once_its_grace_has_passed(
    real_redis: redis.Redis, namespace: str
) -> None:
    keys = Keys.for_namespace(namespace)
    settings = Settings(redis_url="redis://unused", namespace=namespace)
    mark(real_redis, keys, call("PreToolUse", "guarded-1"))
    clock = Clock()
    watch = UnguardedWatch(real_redis, keys, grace_ms=1_000, clock=clock)
    watch.note(call("PostToolUse", "guarded-1"))
    watch.note(call("PostToolUse", "nobody-asked", agent="a2", session="s9"))
    watch.note(call("PromptSubmit", "not-a-tool-call"))

    clock.now += 0.5
    assert watch.check() == 0  # within the grace: not looked up yet
    assert report.recent(real_redis, settings) == []
    assert watch.wait_ms() is not None and 0 < watch.wait_ms() <= 501  # type: ignore[operator]

    clock.now += 0.6
    assert watch.check() == 1
    [found] = report.recent(real_redis, settings)
    assert (found.agent, found.session, found.tool) == ("a2", "s9", "Bash")
    assert found.cli == "claude-code"
    assert report.counts(real_redis, settings) == {("a2", "claude-code"): 1}
    assert (watch.checked, watch.found) == (2, 1)
    assert watch.check() == 0 and watch.wait_ms() is None  # looked up once, not again


def test_one_zadd_marks_and_one_zmscore_looks_up_every_call_that_came_due(
    real_redis: redis.Redis, namespace: str
) -> None:
    keys = Keys.for_namespace(namespace)
    posts = [call("PostToolUse", f"c{i}") for i in range(200)]
    zadds = real_redis.info("commandstats").get("cmdstat_zadd", {}).get("calls", 0)
    mark(real_redis, keys, *(call("PreToolUse", f"c{i}") for i in range(200)))
    # a flush writes every mark queued since the last in one ZADD
    assert real_redis.info("commandstats")["cmdstat_zadd"]["calls"] - zadds == 1
    clock = Clock()
    watch = UnguardedWatch(real_redis, keys, grace_ms=10, clock=clock)
    for post in posts:
        watch.note(post)
    before = real_redis.info("commandstats").get("cmdstat_zmscore", {}).get("calls", 0)
    clock.now += 1.0
    assert watch.check() == 0
    after = real_redis.info("commandstats")["cmdstat_zmscore"]["calls"]
    assert after - before == 1
    assert not real_redis.exists(keys.unguarded_calls(), keys.unguarded_counts())


def test_calls_held_through_a_redis_error_are_looked_up_on_the_next_check(
    real_redis: redis.Redis, namespace: str
) -> None:
    keys = Keys.for_namespace(namespace)
    settings = Settings(redis_url="redis://unused", namespace=namespace)
    down = redis.Redis(port=1, socket_connect_timeout=0.2)  # nothing listens there
    clock = Clock()
    watch = UnguardedWatch(down, keys, grace_ms=10, clock=clock)
    watch.note(call("PostToolUse", "during-the-outage"))
    clock.now += 1.0
    try:
        watch.check()
    except redis.exceptions.ConnectionError:
        pass
    else:
        raise AssertionError("a check against a Redis that is down must raise")
    watch.client = real_redis
    assert watch.check() == 1
    assert [c.session for c in report.recent(real_redis, settings)] == ["s1"]


def test_old_marks_are_dropped_by_the_flush_that_writes_new_ones(
    real_redis: redis.Redis, namespace: str
) -> None:
    keys = Keys.for_namespace(namespace)
    real_redis.zadd(keys.guarded_calls(), {b"stale": 1})  # written in 1970
    mark(real_redis, keys, call("PreToolUse", "fresh"))
    members = real_redis.zrange(keys.guarded_calls(), 0, -1)
    assert members == guarded_names(call("PreToolUse", "fresh"))


def test_the_metrics_family_counts_unguarded_calls_by_agent_and_cli(
    real_redis: redis.Redis, namespace: str
) -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from hookbus.workers.unguarded.metrics import UnguardedCollector

    keys = Keys.for_namespace(namespace)
    settings = Settings(redis_url="redis://unused", namespace=namespace)
    report.record_unguarded(
        real_redis, keys, [call("PostToolUse", "x1"), call("PostToolUse", "x2", agent="a2")]
    )
    report.record_unguarded(real_redis, keys, [call("PostToolUse", "x3")])
    registry = CollectorRegistry()
    registry.register(UnguardedCollector(real_redis, settings))  # type: ignore[arg-type]
    text = generate_latest(registry).decode()
    assert 'hookbus_unguarded_tool_calls_total{agent="a1",cli="claude-code"} 2.0' in text
    assert 'hookbus_unguarded_tool_calls_total{agent="a2",cli="claude-code"} 1.0' in text
    down = UnguardedCollector(redis.Redis(port=1, socket_connect_timeout=0.2), settings)
    assert list(down.collect()) == []  # a scrape that cannot read Redis reports nothing


def test_then_notice_tells_each_session_once_and_a_failing_redis_costs_only_the_notice(
    real_redis: redis.Redis, real_redis_url: str, namespace: str
) -> None:
    keys = Keys.for_namespace(namespace)
    settings = Settings(
        redis_url=real_redis_url, namespace=namespace, unguarded=UnguardedSettings(then="notice")
    )
    react = UnguardedReaction(real_redis, settings)
    clock = Clock()
    watch = UnguardedWatch(real_redis, keys, grace_ms=1_000, clock=clock, react=react)
    for n in range(3):
        watch.note(call("PostToolUse", f"c{n}", agent="a1", session="s1"))
    watch.note(call("PostToolUse", "c9", agent="a2", session="s1"))
    clock.now += 1.1
    assert watch.check() == 4
    watch.note(call("PostToolUse", "c10", agent="a1", session="s1"))  # told already
    clock.now += 1.1
    assert watch.check() == 1
    made = sorted(
        (n.agent, n.session, n.severity, n.blocking)
        for n in live_notices(real_redis, namespace)
        if n.created_by == "fleet:unguarded"
    )
    assert made == [("a1", "s1", "warning", False), ("a2", "s1", "warning", False)]

    gone = redis.Redis(port=1, socket_connect_timeout=0.2)  # nothing listens there
    watch.react = UnguardedReaction(gone, settings)
    watch.note(call("PostToolUse", "c11", agent="a3", session="s3"))
    clock.now += 1.1
    assert watch.check() == 1  # recorded; the notice could not be made, and that is logged
    assert "s3" in {c.session for c in report.recent(real_redis, settings)}
