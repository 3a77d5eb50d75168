"""How the dispatcher packs a read's events: per hook, in read order, at most
``rq.pack_max_events`` to a job, and a pack of one is an ordinary single job."""

from __future__ import annotations

import fakeredis
from rq import Queue

from hookbus.bus import eventlog, keys
from hookbus.bus.settings.loader import RQSettings, Settings
from hookbus.bus.wire import Event, decode
from hookbus.workers.fanout.dispatcher import Dispatcher
from hookbus.workers.fanout.job_specs import HOOK_JOB_FUNC, job_id_for
from hookbus.workers.fanout.packs import HOOK_PACK_FUNC
from hookbus.workers.fanout.serializer import MsgpackSerializer
from tests.fanout_helpers import Hook, Retries, StubRegistry

NS = "packs"


def _dispatch(client: fakeredis.FakeRedis, events: list[Event], pack: int, *hooks: Hook) -> Queue:
    settings = Settings(namespace=NS, rq=RQSettings(pack_max_events=pack))
    dispatcher = Dispatcher(settings, StubRegistry(list(hooks)), bus=client, rq=client)
    dispatcher.ensure_group()
    eventlog.publish_many(client, settings, events)
    while dispatcher.step():
        pass
    return Queue(keys.rq_queue_name(NS), connection=client, serializer=MsgpackSerializer)


def test_a_reads_events_of_one_hook_go_in_packs_of_at_most_the_limit_in_read_order(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    events = [Event(kind="Stop", payload={"i": i}) for i in range(10)]
    queue = _dispatch(fake_redis, events, 4, Hook("a", ("Stop",), retries=Retries(2, [5, 10])))
    jobs = queue.jobs
    assert [job.func_name for job in jobs] == [HOOK_PACK_FUNC] * 3
    carried = [[decode(data, Event).id for data in job.args[1]] for job in jobs]
    assert carried == [[e.id for e in events[i : i + 4]] for i in (0, 4, 8)]
    assert jobs[0].meta["retries"] == 2 and jobs[0].meta["intervals"] == [5, 10]
    assert jobs[0].retries_left is None  # a pack is never retried whole


def test_each_hook_gets_its_own_packs_and_a_pack_of_one_is_a_single_job(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    events = [Event(kind="Stop", payload={"i": i}) for i in range(3)]
    queue = _dispatch(fake_redis, events, 2, Hook("a", ("Stop",)), Hook("b", ("Stop",)))
    by_hook: dict[str, list[str]] = {}
    for job in queue.jobs:
        by_hook.setdefault(job.meta["hook"], []).append(job.func_name)
    assert by_hook == {"a": [HOOK_PACK_FUNC, HOOK_JOB_FUNC], "b": [HOOK_PACK_FUNC, HOOK_JOB_FUNC]}
    singles = [job for job in queue.jobs if job.func_name == HOOK_JOB_FUNC]
    assert {job.id for job in singles} == {job_id_for(events[2].id, h) for h in ("a", "b")}


def test_a_slow_dispatcher_whose_read_was_reclaimed_packs_nothing_again(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    settings = Settings(namespace=NS, rq=RQSettings(pack_max_events=200))
    registry = StubRegistry([Hook("a", ("Stop",))])
    slow = Dispatcher(settings, registry, bus=fake_redis, rq=fake_redis, consumer="slow")
    slow.ensure_group()
    eventlog.publish_many(fake_redis, settings, [Event(kind="Stop") for _ in range(5)])
    entries = slow._read(None)  # read, then stalled
    fast = Dispatcher(
        settings, registry, bus=fake_redis, rq=fake_redis, consumer="fast", claim_min_idle_ms=0
    )
    assert fast.reclaim() == 5
    queue = Queue(keys.rq_queue_name(NS), connection=fake_redis, serializer=MsgpackSerializer)
    assert [len(job.args[1]) for job in queue.jobs] == [5]  # one pack
    slow.handle(entries, redelivered=False)
    assert queue.count == 1
    assert slow.stats.skipped_duplicates == 5
