"""Dead letters (RQ's failed registry) and the job allow-list, against fakeredis."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import fakeredis
import pytest
from rq import Queue

from hookbus.bus import eventlog, keys
from hookbus.bus.settings.loader import RQSettings, Settings
from hookbus.bus.wire import Event, HookRun
from hookbus.errors import HookExecutionError, JobNotFound
from hookbus.workers.fanout import jobs
from hookbus.workers.fanout.dispatcher import Dispatcher
from hookbus.workers.fanout.job_specs import job_id_for
from hookbus.workers.fanout.rq_classes import HookJob, make_worker
from hookbus.workers.fanout.serializer import MsgpackSerializer
from hookbus.workers.fleet import dead_letters as dlq
from tests.fanout_helpers import Hook, Retries, StubRegistry

NS = "dlq"


def _settings() -> Settings:
    return Settings(namespace=NS, rq=RQSettings(result_ttl_s=600))


class Flaky:
    """Fails while ``broken``; counts calls."""

    def __init__(self) -> None:
        self.broken = True
        self.calls = 0

    def __call__(self, arg: Any) -> None:
        self.calls += 1
        if self.broken:
            raise HookExecutionError("flaky", "broken on purpose")


@pytest.fixture
def flaky() -> Flaky:
    return Flaky()


@pytest.fixture
def setup(fake_redis: fakeredis.FakeRedis, flaky: Flaky) -> Iterator[tuple[Any, list[Event]]]:
    registry = StubRegistry(
        [Hook("flaky", ("Stop",), retries=Retries(1, [])), Hook("fine", ("Stop",))],
        {"flaky": flaky},
    )
    ctx = jobs.JobContext(
        settings=_settings(), registry=registry, bus=fake_redis, keys=keys.Keys.for_namespace(NS)
    )
    jobs.install(ctx)
    d = Dispatcher(_settings(), registry, bus=fake_redis, rq=fake_redis)
    d.ensure_group()
    events = [Event(kind="Stop", payload={"i": i}) for i in range(3)]
    eventlog.publish_many(fake_redis, _settings(), events)
    d.step()

    def work() -> None:
        make_worker(_settings(), isolation="none", connection=fake_redis).work(
            burst=True, logging_level="WARNING"
        )

    work()
    yield work, events
    jobs.uninstall()


def test_jobs_that_fail_every_try_are_listed_with_their_hook_event_and_error(
    fake_redis: fakeredis.FakeRedis, setup: Any, flaky: Flaky
) -> None:
    _, events = setup
    assert flaky.calls == 6  # three events, one retry each
    dead = dlq.list_dead(fake_redis, _settings())
    assert sorted(d.event for d in dead) == sorted(e.id for e in events)
    assert {(d.hook, d.kind, d.tries, d.events) for d in dead} == {("flaky", "Stop", 2, 1)}
    assert all("broken on purpose" in (d.error or "") for d in dead)
    assert dlq.count_dead(fake_redis, _settings()) == 3
    assert len(dlq.list_dead(fake_redis, _settings(), limit=2)) == 2


def test_show_gives_the_traceback_and_the_event(
    fake_redis: fakeredis.FakeRedis, setup: Any
) -> None:
    _, events = setup
    job_id = job_id_for(events[0].id, "flaky")
    shown = dlq.show_dead(fake_redis, _settings(), job_id)
    assert shown["in_registry"] is True
    assert "HookExecutionError" in shown["traceback"]
    assert shown["events_data"][0]["id"] == events[0].id
    with pytest.raises(JobNotFound):
        dlq.show_dead(fake_redis, _settings(), "hb-missing")


def test_requeue_runs_the_job_again_with_its_retries_restored(
    fake_redis: fakeredis.FakeRedis, setup: Any, flaky: Flaky
) -> None:
    work, events = setup
    job_id = job_id_for(events[0].id, "flaky")
    assert dlq.requeue_dead(fake_redis, _settings(), job_id) == job_id
    job = HookJob.fetch(job_id, connection=fake_redis, serializer=MsgpackSerializer)
    assert job.retries_left == 1
    work()  # still broken: first try and one retry, then dead again
    assert flaky.calls == 8
    assert dlq.count_dead(fake_redis, _settings()) == 3
    flaky.broken = False
    assert sorted(dlq.requeue_all(fake_redis, _settings())) == sorted(
        job_id_for(e.id, "flaky") for e in events
    )
    work()
    assert flaky.calls == 11
    assert dlq.count_dead(fake_redis, _settings()) == 0
    with pytest.raises(JobNotFound):
        dlq.requeue_dead(fake_redis, _settings(), job_id)  # finished, not dead


def test_purge_deletes_named_dead_letters_or_all_of_them(
    fake_redis: fakeredis.FakeRedis, setup: Any
) -> None:
    _, events = setup
    first = job_id_for(events[0].id, "flaky")
    assert dlq.purge_dead(fake_redis, _settings(), [first]) == 1
    assert not fake_redis.exists(HookJob.key_for(first))
    assert dlq.purge_dead(fake_redis, _settings()) == 2
    assert dlq.list_dead(fake_redis, _settings()) == []


def test_a_job_naming_another_function_fails_instead_of_running_it(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    queue = Queue(keys.rq_queue_name(NS), connection=fake_redis, serializer=MsgpackSerializer)
    queue.enqueue("os.getcwd", job_id="evil")
    make_worker(_settings(), isolation="none", connection=fake_redis).work(
        burst=True, logging_level="WARNING"
    )
    [dead] = dlq.list_dead(fake_redis, _settings())
    assert dead.id == "evil"
    assert "not a hookbus job function" in (dead.error or "")


def test_the_serializer_round_trips_job_data_with_raw_bytes() -> None:
    data = ("hookbus.workers.fanout.jobs.run_hook_job", None, ["hook", b"\x81\xa4kind"], {})
    assert MsgpackSerializer.loads(MsgpackSerializer.dumps(data)) == [
        "hookbus.workers.fanout.jobs.run_hook_job",
        None,
        ["hook", b"\x81\xa4kind"],
        {},
    ]
    run = HookRun(hook_id="h", outcome="continue")
    assert MsgpackSerializer.loads(MsgpackSerializer.dumps({"hook_id": run.hook_id})) == {
        "hook_id": "h"
    }


def test_an_abandoned_job_gets_at_most_two_extra_runs(fake_redis: fakeredis.FakeRedis) -> None:
    from rq.exceptions import AbandonedJobError

    from hookbus.workers.fanout.rq_classes import MAX_ABANDONED_RERUNS, _rerun_abandoned

    queue = Queue(keys.rq_queue_name(NS), connection=fake_redis, serializer=MsgpackSerializer)
    job = queue.enqueue("hookbus.workers.fanout.jobs.run_hook_job", "h", b"", job_id="hb-x")
    granted = []
    for _ in range(MAX_ABANDONED_RERUNS + 1):
        job.retries_left = 0
        _rerun_abandoned(job, AbandonedJobError)
        granted.append(job.retries_left)
    assert granted == [1] * MAX_ABANDONED_RERUNS + [0]
    assert job.meta["abandoned"] == MAX_ABANDONED_RERUNS
    # other failures are the hook's own: its declared retries decide
    other = queue.enqueue("hookbus.workers.fanout.jobs.run_hook_job", "h", b"", job_id="hb-y")
    _rerun_abandoned(other, RuntimeError)
    assert not other.retries_left


def test_an_abandoned_job_reruns_at_once_and_keeps_the_hook_s_own_retry_intervals(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    """A scheduled rerun waits for RQ's scheduler, whose lock a killed worker may hold for
    a minute: the rerun of an abandoned job is immediate, the hook's intervals unchanged."""
    from rq import Retry
    from rq.exceptions import AbandonedJobError

    from hookbus.workers.fanout.rq_classes import _rerun_abandoned

    queue = Queue(keys.rq_queue_name(NS), connection=fake_redis, serializer=MsgpackSerializer)
    for declared, intervals in ((2, [5, 30]), (3, [5]), (1, [7])):
        job = queue.enqueue(
            "hookbus.workers.fanout.jobs.run_hook_job",
            "h",
            b"",
            job_id=f"hb-{declared}-{len(intervals)}",
            retry=Retry(max=declared, interval=intervals),
        )
        expected = []
        while job.retries_left:  # what the hook's own retries wait, untouched
            expected.append(job.get_retry_interval())
            job.retries_left -= 1
        job.retries_left = declared
        _rerun_abandoned(job, AbandonedJobError)
        waits = []
        while job.retries_left:
            waits.append(job.get_retry_interval())
            job.retries_left -= 1
        assert waits == [0, *expected], (declared, intervals)
