"""A pack's progress log: where a rerun starts, which event a death is counted against,
what a finished pack leaves behind (the kills themselves are played on real RQ workers in
tests/integration/test_fanout_pack_kills.py)."""

from __future__ import annotations

import fakeredis

from hookbus.workers.fanout.pack_log import FLUSHED_TTL_S, PACK_LOG_TTL_S, PackLog

KEY = "hookbus:{ns}:pack-log:hbp-1"


def test_a_first_start_runs_from_the_top_and_counts_no_death(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    state = PackLog(fake_redis, KEY, "hbp-1").open(5)
    assert (state.starts, state.done, state.kills, state.records) == (1, 0, 0, {})
    assert not state.resumed
    assert 0 < fake_redis.ttl(KEY) <= PACK_LOG_TTL_S


def test_a_rerun_starts_after_the_last_outcome_and_counts_a_death_against_the_next_event(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    plog = PackLog(fake_redis, KEY, "hbp-1")
    plog.open(5)
    plog.outcome(0, b"r0")
    plog.outcome(1, b"r1")
    again = plog.open(5)  # the worker died running event 2
    assert (again.resumed, again.done, again.kills) == (True, 2, 1)
    assert again.records == {0: b"r0", 1: b"r1"}
    assert plog.open(5).kills == 2  # died on event 2 again
    plog.outcome(2, b"r2")
    assert plog.open(5).kills == 1  # a death on event 3 is event 3's


def test_an_outcome_and_what_follows_from_it_are_written_together(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    plog = PackLog(fake_redis, KEY, "hbp-1")
    plog.open(2)
    plog.outcome(0, b"r0", lambda pipe: pipe.set("dead-letter-of-event-0", 1))
    assert fake_redis.get("dead-letter-of-event-0") == b"1"
    assert plog.open(2).done == 1


def test_a_finished_pack_keeps_only_its_mark_and_is_not_run_again(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    plog = PackLog(fake_redis, KEY, "hbp-1")
    plog.open(1)
    plog.outcome(0, b"r0")
    plog.flushed(1)
    assert 0 < fake_redis.ttl(KEY) <= FLUSHED_TTL_S
    state = plog.open(1)
    assert state.flushed and state.records == {} and state.kills == 0
