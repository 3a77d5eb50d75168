"""The fan-out dispatcher against fakeredis, with a hook registry built in the test."""

from __future__ import annotations

from typing import Any

import fakeredis
import pytest
from rq import Queue
from rq.exceptions import AbandonedJobError
from rq.job import Job
from rq.registry import FailedJobRegistry

from hookbus.bus import eventlog, keys
from hookbus.bus.keys import FANOUT_GROUP
from hookbus.bus.settings.loader import RQSettings, Settings
from hookbus.bus.wire import Event
from hookbus.errors import HookExecutionError
from hookbus.workers.fanout import jobs
from hookbus.workers.fanout.dispatcher import Dispatcher
from hookbus.workers.fanout.job_specs import (
    batch_job_id_for,
    fans_out,
    job_id_for,
    job_timeout_s,
    rq_retry,
)
from hookbus.workers.fanout.rq_classes import _rerun_abandoned, make_worker
from hookbus.workers.fanout.serializer import MsgpackSerializer
from tests.fanout_helpers import Batch, Hook, Retries, StubRegistry

NS = "fan"


def _settings(pack_max_events: int = 1) -> Settings:
    """One job per event unless a test asks for packs: these tests count jobs to prove that
    nothing is enqueued twice."""
    return Settings(namespace=NS, rq=RQSettings(result_ttl_s=600, pack_max_events=pack_max_events))


def _dispatcher(client: fakeredis.FakeRedis, registry: StubRegistry, **kw: Any) -> Dispatcher:
    d = Dispatcher(_settings(), registry, bus=client, rq=client, **kw)
    d.ensure_group()
    return d


def _queue(client: fakeredis.FakeRedis) -> Queue:
    return Queue(keys.rq_queue_name(NS), connection=client, serializer=MsgpackSerializer)


def _pending(client: fakeredis.FakeRedis) -> int:
    return int(client.xpending(keys.events(NS), FANOUT_GROUP)["pending"])


def test_one_job_per_matching_non_blocking_hook_then_the_entry_is_acknowledged(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    registry = StubRegistry(
        [
            Hook("a", ("PostToolUse",)),
            Hook("b", ("PostToolUse",)),
            Hook("guard", ("PostToolUse",), blocking=True),
            Hook("other", ("Stop",)),
        ]
    )
    d = _dispatcher(fake_redis, registry)
    event = Event(kind="PostToolUse")
    eventlog.publish(fake_redis, _settings(), event)
    assert d.step() == 1
    assert sorted(_queue(fake_redis).job_ids) == sorted(
        [job_id_for(event.id, "a"), job_id_for(event.id, "b")]
    )
    assert _pending(fake_redis) == 0


def test_an_event_no_hook_matches_is_acknowledged_at_once(fake_redis: fakeredis.FakeRedis) -> None:
    d = _dispatcher(fake_redis, StubRegistry([Hook("a", ("Stop",))]))
    eventlog.publish(fake_redis, _settings(), Event(kind="Notification"))
    assert d.step() == 1
    assert _queue(fake_redis).count == 0
    assert _pending(fake_redis) == 0


def test_a_hook_without_a_blocking_flag_follows_its_kind_default() -> None:
    from hookbus.bus.kinds import DEFAULT_CATALOGUE

    post = DEFAULT_CATALOGUE.resolve("PostToolUse")
    pre = DEFAULT_CATALOGUE.resolve("PreToolUse")
    assert fans_out(Hook("x", ()), post)
    assert not fans_out(Hook("x", ()), pre)
    assert fans_out(Hook("x", (), blocking=False), pre)
    assert not fans_out(Hook("x", (), blocking=True), post)


def test_job_options_come_from_the_hook() -> None:
    hook = Hook("h", (), timeout_s=2.5, retries=Retries(3, [1, 2, 4]))
    assert job_timeout_s(hook) == 3 + 1
    retry = rq_retry(hook)
    assert retry is not None and retry.max == 3 and retry.intervals == [1, 2, 4]
    assert rq_retry(Hook("h", ())) is None
    assert job_timeout_s(Hook("h", ())) == 10 + 1


def test_job_ids_are_stable_and_legal_for_rq_whatever_the_ids_hold() -> None:
    a = job_id_for("ev:1/2", "my.hook name")
    assert a == job_id_for("ev:1/2", "my.hook name")
    assert a != job_id_for("ev:1/2", "other")
    assert batch_job_id_for("ev:1/2", "my.hook name") != a
    from rq.job import validate_job_id

    validate_job_id(a)
    validate_job_id(batch_job_id_for("ev", "h"))


def _enqueue_then_die(d: Dispatcher, registry: StubRegistry) -> list[Event]:
    """What a dispatcher that dies between enqueue and ack leaves behind."""
    from hookbus.bus.wire import decode
    from hookbus.workers.fanout.enqueue import Plan

    entries = d._read(None)
    plan = Plan()
    events = []
    for entry_id, fields in entries:
        event = decode(fields[b"e"], Event)
        events.append(event)
        d.plan_event(plan, entry_id, event, fields[b"e"], registry.matching(event))
    d.enqueue(plan)
    return events


def test_a_redelivered_entry_gets_no_second_job(fake_redis: fakeredis.FakeRedis) -> None:
    registry = StubRegistry([Hook("a", ("Stop",)), Hook("b", ("Stop",))])
    first = _dispatcher(fake_redis, registry, consumer="dead")
    eventlog.publish(fake_redis, _settings(), Event(kind="Stop"))
    _enqueue_then_die(first, registry)
    assert _queue(fake_redis).count == 2 and _pending(fake_redis) == 1
    # a second dispatcher reclaims the idle entry: no new job, entry acknowledged
    second = _dispatcher(fake_redis, registry, consumer="alive", claim_min_idle_ms=0)
    assert second.reclaim() == 1
    assert second.stats.skipped_duplicates == 2
    assert _queue(fake_redis).count == 2
    assert _pending(fake_redis) == 0


def test_redelivery_after_the_jobs_ran_and_their_records_expired_makes_no_second_job(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    registry = StubRegistry([Hook("a", ("Stop",))])
    first = _dispatcher(fake_redis, registry, consumer="dead")
    eventlog.publish(fake_redis, _settings(), Event(kind="Stop"))
    [event] = _enqueue_then_die(first, registry)
    # the job ran and RQ already dropped it (a short result_ttl)
    job_id = job_id_for(event.id, "a")
    Job.fetch(job_id, connection=fake_redis, serializer=MsgpackSerializer).delete()
    assert _queue(fake_redis).count == 0
    second = _dispatcher(fake_redis, registry, consumer="alive", claim_min_idle_ms=0)
    assert second.reclaim() == 1
    assert _queue(fake_redis).count == 0
    assert not fake_redis.exists(Job.key_for(job_id))
    assert 0 < fake_redis.ttl(keys.dispatched(NS, event.id)) <= 3600


def test_a_redelivered_entry_whose_jobs_never_got_enqueued_gets_them_now(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    registry = StubRegistry([Hook("a", ("Stop",))])
    first = _dispatcher(fake_redis, registry, consumer="dead")
    event = Event(kind="Stop")
    eventlog.publish(fake_redis, _settings(), event)
    first._read(None)  # died before enqueueing anything
    second = _dispatcher(fake_redis, registry, consumer="alive", claim_min_idle_ms=0)
    assert second.reclaim() == 1
    assert _queue(fake_redis).job_ids == [job_id_for(event.id, "a")]


def test_an_undecodable_entry_goes_to_the_dead_letter_stream(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    d = _dispatcher(fake_redis, StubRegistry([]))
    fake_redis.xadd(keys.events(NS), {b"e": b"\xc1garbage"})
    fake_redis.xadd(keys.events(NS), {b"x": b"no event field"})
    assert d.step() == 2
    dead = fake_redis.xrange(keys.dead_letters(NS))
    assert len(dead) == 2
    assert all(fields[b"group"] == b"fanout" for _, fields in dead)
    assert {fields[b"stream"] for _, fields in dead} == {keys.events(NS).encode()}
    assert _pending(fake_redis) == 0


def test_an_entry_delivered_too_often_is_dead_lettered(fake_redis: fakeredis.FakeRedis) -> None:
    settings = Settings(namespace=NS)
    registry = StubRegistry([Hook("a", ("Stop",))])
    d = Dispatcher(settings, registry, bus=fake_redis, rq=fake_redis, claim_min_idle_ms=0)
    d.ensure_group()
    eventlog.publish(fake_redis, settings, Event(kind="Stop"))
    d._read(None)  # delivered once, never acknowledged
    for _ in range(settings.workers.max_deliveries):
        fake_redis.xautoclaim(keys.events(NS), FANOUT_GROUP, d.consumer, 0, "0-0")
    assert d.reclaim() == 1
    assert fake_redis.xlen(keys.dead_letters(NS)) == 1
    assert _queue(fake_redis).count == 0


def test_batching_hook_events_are_buffered_then_flushed_as_one_job(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    registry = StubRegistry(
        [Hook("telemetry", ("PostToolUse",), batch=Batch(max_events=3, max_wait_ms=60_000))]
    )
    d = _dispatcher(fake_redis, registry)
    events = [Event(kind="PostToolUse", payload={"i": i}) for i in range(7)]
    eventlog.publish_many(fake_redis, _settings(), events)
    d.step()
    q = _queue(fake_redis)
    # two full batches of 3, one event still waiting for more (or for max_wait_ms)
    assert q.count == 2
    assert fake_redis.llen(keys.batch(NS, "telemetry")) == 1
    assert _pending(fake_redis) == 0
    first = Job.fetch(q.job_ids[0], connection=fake_redis, serializer=MsgpackSerializer)
    assert first.id == batch_job_id_for(events[0].id, "telemetry")
    assert first.meta["events"] == [e.id for e in events[:3]]
    assert d.flush_batches(force=True) == 1
    assert fake_redis.llen(keys.batch(NS, "telemetry")) == 0


def test_a_batch_whose_wait_is_over_is_flushed_even_when_short(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    registry = StubRegistry(
        [Hook("telemetry", ("PostToolUse",), batch=Batch(max_events=100, max_wait_ms=0))]
    )
    d = _dispatcher(fake_redis, registry)
    eventlog.publish_many(fake_redis, _settings(), [Event(kind="PostToolUse") for _ in range(4)])
    d.step()
    assert _queue(fake_redis).count == 1
    job = Job.fetch(
        _queue(fake_redis).job_ids[0], connection=fake_redis, serializer=MsgpackSerializer
    )
    assert job.meta["batch_size"] == 4


def test_a_flush_that_died_before_trimming_is_not_enqueued_twice(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    registry = StubRegistry(
        [Hook("telemetry", ("PostToolUse",), batch=Batch(max_events=2, max_wait_ms=60_000))]
    )
    d = _dispatcher(fake_redis, registry)
    eventlog.publish_many(fake_redis, _settings(), [Event(kind="PostToolUse") for _ in range(2)])
    d.step()
    assert _queue(fake_redis).count == 1
    # simulate the crash: put the flushed items back at the head of the buffer
    job = Job.fetch(
        _queue(fake_redis).job_ids[0], connection=fake_redis, serializer=MsgpackSerializer
    )
    raw = job.args[1]
    from hookbus.bus.wire import decode, now_ms

    for data in reversed(raw):
        event = decode(data, Event)
        fake_redis.lpush(
            keys.batch(NS, "telemetry"), d.batches.item_encoder.encode((event.id, now_ms(), data))
        )
    assert d.flush_batches() == 0
    assert d.stats.skipped_duplicates == 1
    assert fake_redis.llen(keys.batch(NS, "telemetry")) == 0
    assert _queue(fake_redis).count == 1


class _Recorder:
    def __init__(self) -> None:
        self.seen: list[Any] = []

    def __call__(self, arg: Any) -> None:
        self.seen.append(arg)


def _ctx(client: fakeredis.FakeRedis, registry: StubRegistry) -> jobs.JobContext:
    return jobs.JobContext(
        settings=_settings(), registry=registry, bus=client, keys=keys.Keys.for_namespace(NS)
    )


@pytest.fixture
def installed() -> Any:
    yield
    jobs.uninstall()


def test_jobs_run_each_hook_and_log_every_run_to_the_decision_stream(
    fake_redis: fakeredis.FakeRedis, installed: None
) -> None:
    def boom(arg: Any) -> None:
        raise HookExecutionError("bad", "exit 1")

    record = _Recorder()
    registry = StubRegistry(
        [Hook("good", ("Stop",)), Hook("bad", ("Stop",)), Hook("also", ("Stop",))],
        {"good": record, "bad": boom},
    )
    jobs.install(_ctx(fake_redis, registry))
    d = _dispatcher(fake_redis, registry)
    event = Event(kind="Stop", session_id="s")
    eventlog.publish(fake_redis, _settings(), event)
    d.step()
    worker = make_worker(_settings(), isolation="none", connection=fake_redis)
    worker.work(burst=True, logging_level=None)
    assert sorted(call[0] for call in registry.calls) == ["also", "bad", "good"]
    assert [e.id for e in record.seen] == [event.id]
    failed = FailedJobRegistry(keys.rq_queue_name(NS), connection=fake_redis)
    assert failed.get_job_ids() == [job_id_for(event.id, "bad")]
    log = fake_redis.xrange(keys.decisions(NS))
    outcomes = sorted((f[b"hook"].decode(), f[b"outcome"].decode()) for _, f in log)
    assert outcomes == [("also", "continue"), ("bad", "error"), ("good", "continue")]
    assert all(f[b"type"] == b"hook_run" and f[b"id"] == event.id.encode() for _, f in log)


def test_a_slow_dispatcher_whose_entries_were_reclaimed_enqueues_and_buffers_nothing_again(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    registry = StubRegistry(
        [
            Hook("a", ("Stop",)),
            Hook("telemetry", ("Stop",), batch=Batch(max_events=100, max_wait_ms=60_000)),
        ]
    )
    slow = _dispatcher(fake_redis, registry, consumer="slow")
    eventlog.publish_many(fake_redis, _settings(), [Event(kind="Stop") for _ in range(3)])
    entries = slow._read(None)  # read, then stalled
    fast = _dispatcher(fake_redis, registry, consumer="fast", claim_min_idle_ms=0)
    assert fast.reclaim() == 3
    assert _queue(fake_redis).count == 3
    assert fake_redis.llen(keys.batch(NS, "telemetry")) == 3
    # the slow one wakes up and handles what it read long ago
    slow.handle(entries, redelivered=False)
    assert _queue(fake_redis).count == 3
    assert fake_redis.llen(keys.batch(NS, "telemetry")) == 3
    assert slow.stats.skipped_duplicates == 3
    assert _pending(fake_redis) == 0


def test_a_repeated_flush_never_trims_the_next_batch(fake_redis: fakeredis.FakeRedis) -> None:
    registry = StubRegistry(
        [Hook("telemetry", ("Stop",), batch=Batch(max_events=2, max_wait_ms=60_000))]
    )
    d = _dispatcher(fake_redis, registry)
    eventlog.publish_many(fake_redis, _settings(), [Event(kind="Stop") for _ in range(2)])
    key = keys.batch(NS, "telemetry")
    d.step()
    assert _queue(fake_redis).count == 1 and fake_redis.llen(key) == 0
    # a late twin of that flush (its lock had expired) trims with the old head item
    eventlog.publish_many(fake_redis, _settings(), [Event(kind="Stop")])
    d.step()
    head = fake_redis.lindex(key, 0)
    assert d.batches.trim_script(keys=[key], args=[b"not the head", 2]) == 0
    assert fake_redis.lindex(key, 0) == head


def test_an_undecodable_buffer_item_is_dead_lettered_and_the_batch_still_flushes(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    registry = StubRegistry(
        [Hook("telemetry", ("Stop",), batch=Batch(max_events=2, max_wait_ms=60_000))]
    )
    d = _dispatcher(fake_redis, registry)
    key = keys.batch(NS, "telemetry")
    fake_redis.rpush(key, b"\xc1not msgpack")
    eventlog.publish_many(fake_redis, _settings(), [Event(kind="Stop") for _ in range(2)])
    d.step()
    d.step()
    assert _queue(fake_redis).count == 1
    assert fake_redis.llen(key) == 0
    [(_, dead)] = fake_redis.xrange(keys.dead_letters(NS))
    assert dead[b"item"] == b"\xc1not msgpack"


def test_a_job_that_ran_and_is_run_again_as_abandoned_does_not_run_its_hook_twice(
    fake_redis: fakeredis.FakeRedis, installed: None
) -> None:
    """The worker ran the hook, then died (or lost Redis) before RQ recorded the job as
    done; RQ's cleanup finds it abandoned and requeues it. The rerun must not repeat the
    hook's side effect."""
    record = _Recorder()
    registry = StubRegistry([Hook("notify", ("Stop",))], {"notify": record})
    jobs.install(_ctx(fake_redis, registry))
    d = _dispatcher(fake_redis, registry)
    event = Event(kind="Stop", session_id="s")
    eventlog.publish(fake_redis, _settings(), event)
    d.step()
    worker = make_worker(_settings(), isolation="none", connection=fake_redis)
    worker.work(burst=True, logging_level=None)
    assert [e.id for e in record.seen] == [event.id]
    # the same job back in the queue, as RQ's abandoned-job cleanup puts it
    job = Job.fetch(
        job_id_for(event.id, "notify"), connection=fake_redis, serializer=MsgpackSerializer
    )
    _rerun_abandoned(job, AbandonedJobError)
    with fake_redis.pipeline() as pipe:
        job.retry(_queue(fake_redis), pipe)
        pipe.execute()
    worker.work(burst=True, logging_level=None)
    assert [e.id for e in record.seen] == [event.id]  # not twice
    runs = [f for _, f in fake_redis.xrange(keys.decisions(NS)) if f[b"hook"] == b"notify"]
    assert len(runs) == 1
