"""Stream health on the real Redis: what each poisoning looks like to the check, what the
recovery keeps (undelivered entries), leaves out (the poisoning ones) and leaves behind
(an aside copy only while entries are pending there), and the metric a scrape exports."""

from __future__ import annotations

import redis

from hookbus.bus.keys import CHAIN_GROUP, Keys
from hookbus.workers.fleet import stream_health
from hookbus.workers.fleet.stream_health import (
    StreamHealthCollector,
    busy_problem,
    check_stream,
    recover,
)

MAX_ID = "18446744073709551615-18446744073709551615"


def test_each_poisoning_is_named_by_the_check(real_redis: redis.Redis, namespace: str) -> None:
    key = Keys.for_namespace(namespace).requests
    assert check_stream(real_redis, key, CHAIN_GROUP) is not None  # missing, a reader alive
    assert check_stream(real_redis, key, CHAIN_GROUP, expect_group=False) is None
    real_redis.xgroup_create(key, CHAIN_GROUP, id="0", mkstream=True)
    assert check_stream(real_redis, key, CHAIN_GROUP) is None
    real_redis.xadd(key, {"e": "x"}, id=f"{2**50}-0")
    problem = check_stream(real_redis, key, CHAIN_GROUP)
    assert problem is not None and problem.problem == "ahead"
    real_redis.xadd(key, {"e": "x"}, id=MAX_ID)
    problem = check_stream(real_redis, key, CHAIN_GROUP)
    assert problem is not None and problem.problem == "exhausted"
    real_redis.xgroup_destroy(key, CHAIN_GROUP)
    real_redis.delete(key)
    real_redis.xadd(key, {"e": "x"})
    problem = check_stream(real_redis, key, CHAIN_GROUP)
    assert problem is not None and problem.problem == "no_group"


def test_recovery_keeps_the_undelivered_entries_and_leaves_the_poison_out(
    real_redis: redis.Redis, namespace: str
) -> None:
    key = Keys.for_namespace(namespace).requests
    real_redis.xgroup_create(key, CHAIN_GROUP, id="0", mkstream=True)
    real_redis.xadd(key, {"e": "delivered"})
    real_redis.xreadgroup(CHAIN_GROUP, "w", {key: ">"}, count=1)  # pending, not acked
    for n in range(3):
        real_redis.xadd(key, {"e": f"waiting-{n}"})
    real_redis.xadd(key, {"e": "poison"}, id=MAX_ID)
    done = recover(real_redis, key, CHAIN_GROUP, maxlen=1000)
    assert done is not None
    assert (done.copied, done.skipped, done.pending_left) == (3, 1, 1)
    kept = [fields[b"e"] for _, fields in real_redis.xrange(key)]
    assert kept == [b"waiting-0", b"waiting-1", b"waiting-2"]
    assert [g["name"] for g in real_redis.xinfo_groups(key)] == [CHAIN_GROUP.encode()]
    assert 0 < real_redis.pttl(done.aside) <= stream_health.ASIDE_TTL_MS  # pending left there
    real_redis.xadd(key, {"e": "new"})  # producers write again
    assert recover(real_redis, key, CHAIN_GROUP, maxlen=1000) is None  # healthy: untouched
    real_redis.delete(done.aside)


def test_a_recovery_with_nothing_pending_leaves_no_copy_behind(
    real_redis: redis.Redis, namespace: str
) -> None:
    key = Keys.for_namespace(namespace).events
    real_redis.xgroup_create(key, "fanout", id="0", mkstream=True)
    real_redis.xadd(key, {"e": "x"}, id=MAX_ID)
    done = recover(real_redis, key, "fanout", maxlen=1000)
    assert done is not None and (done.copied, done.skipped) == (0, 1)
    assert not real_redis.exists(done.aside)


def test_the_collector_exports_one_row_per_unwritable_stream(
    real_redis: redis.Redis, namespace: str
) -> None:
    keys = Keys.for_namespace(namespace)
    real_redis.xgroup_create(keys.requests, CHAIN_GROUP, id="0", mkstream=True)
    collector = StreamHealthCollector(real_redis, [(keys.requests, CHAIN_GROUP)])
    (metric,) = list(collector.collect())
    assert metric.samples == []
    real_redis.xadd(keys.requests, {"e": "x"}, id=MAX_ID)
    (metric,) = list(collector.collect())
    assert [(s.labels, s.value) for s in metric.samples] == [
        ({"stream": keys.requests, "problem": "exhausted"}, 1.0)
    ]


def test_busy_is_told_from_other_errors() -> None:
    busy = redis.exceptions.ResponseError("BUSY Redis is busy running a script.")
    found = busy_problem(busy)
    assert found is not None and found.problem == "busy"
    assert busy_problem(redis.exceptions.ResponseError("WRONGTYPE Operation")) is None
