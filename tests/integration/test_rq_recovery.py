"""The RQ role rides out a Redis outage. An RQ worker whose Redis goes away
reconnects with backoff and, once Redis is back, runs the jobs enqueued after it."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis

from hookbus.bus import eventlog
from hookbus.bus.embedded import EmbeddedServer
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event
from tests.fanout_helpers import processes, spawn_worker, wait_for, worker_env, write_python_hook

#: Long enough for every retry redis-py and RQ make on their own to give up.
OUTAGE_S = 8


def test_an_rq_worker_rides_out_a_redis_restart_and_runs_the_jobs_after_it(
    tmp_path: Path,
) -> None:
    namespace = f"t{uuid.uuid4().hex[:10]}"
    record_key = f"test-record-{namespace}"
    hooks = tmp_path / "hooks"
    write_python_hook(hooks, "alpha", "record")
    write_python_hook(hooks, "sleepy", "sleep_six", events=("Stop",))
    server = EmbeddedServer()
    server.start()
    port = server.port
    settings = Settings(redis_url=server.url, namespace=namespace)
    env = worker_env(server.url, namespace, record_key)
    try:
        with processes() as procs:
            rq_worker = spawn_worker("rq", hooks, env)
            procs.append(rq_worker)
            procs.append(spawn_worker("fanout", hooks, env))
            client = redis.Redis.from_url(server.url)
            before = Event(kind="PostToolUse")
            eventlog.publish_many(client, settings, [before])
            wait_for(
                lambda: client.hget(record_key, f"alpha|{before.id}") == b"1",
                30,
                "the job before the outage to run",
            )
            # the outage starts while a job runs: RQ meets it outside its dequeue retry loop
            eventlog.publish_many(client, settings, [Event(kind="Stop")])
            wait_for(
                lambda: client.hget(f"{record_key}:tries", "sleepy") == b"1",
                30,
                "the slow job to start",
            )
            client.close()

            server.stop()
            time.sleep(OUTAGE_S)
            assert rq_worker.poll() is None, "the RQ worker exited when Redis went away"
            server = EmbeddedServer(port=port)
            server.start()

            client = redis.Redis.from_url(server.url)
            after = Event(kind="PostToolUse")

            events = f"hookbus:{{{namespace}}}:events"
            sent: list[str] = []

            def ran_after() -> bool:
                # sent once the dispatcher has its group back (it recreates the stream too,
                # so "the stream is missing" may never be seen)
                if not sent:
                    groups: Any = client.xinfo_groups(events) if client.exists(events) else []
                    if any(g["name"] == b"fanout" for g in groups):
                        sent.extend(eventlog.publish_many(client, settings, [after]))
                    return False
                return client.hget(record_key, f"alpha|{after.id}") == b"1"

            wait_for(ran_after, 40, "a job enqueued after the outage to run")
            assert rq_worker.poll() is None
            client.close()
    finally:
        server.stop()


def test_a_job_lost_between_dequeue_and_start_runs_within_15_s(
    tmp_path: Path, real_redis: redis.Redis, real_redis_url: str, namespace: str
) -> None:
    from rq import Queue

    from hookbus.bus.keys import Keys
    from hookbus.bus.wire import encode
    from hookbus.workers.fanout.job_specs import HOOK_JOB_FUNC, job_id_for
    from hookbus.workers.fanout.serializer import MsgpackSerializer

    record_key = f"test-record-{namespace}"
    hooks = tmp_path / "hooks"
    write_python_hook(hooks, "alpha", "record")  # no retries: a failure would be final
    queue = Queue(
        Keys.for_namespace(namespace).rq_queue,
        connection=real_redis,
        serializer=MsgpackSerializer,
    )
    event = Event(kind="PostToolUse")
    queue.enqueue_many(
        [
            Queue.prepare_data(
                HOOK_JOB_FUNC,
                args=("alpha", encode(event)),
                job_id=job_id_for(event.id, "alpha"),
                timeout=10,
            )
        ]
    )
    # a worker took it (BLMOVE into RQ's intermediate list) and was killed right there
    assert real_redis.lmove(queue.key, queue.intermediate_queue_key) is not None
    env = worker_env(real_redis_url, namespace, record_key)
    with processes() as procs:
        started = time.monotonic()
        procs.append(spawn_worker("rq", hooks, env))
        wait_for(
            lambda: real_redis.hget(record_key, f"alpha|{event.id}") == b"1",
            15,
            "the orphaned job to run",
            detail=lambda: f"failed jobs: {queue.failed_job_registry.get_job_ids()}",
        )
        assert time.monotonic() - started < 15
    assert queue.failed_job_registry.get_job_ids() == []
    real_redis.delete(record_key)


def test_a_job_abandoned_by_a_dead_worker_runs_again_without_spending_a_retry(
    tmp_path: Path, real_redis: redis.Redis, real_redis_url: str, namespace: str
) -> None:
    from hookbus.workers.fanout.job_specs import job_id_for
    from hookbus.workers.fanout.rq_classes import HookJob
    from hookbus.workers.fanout.serializer import MsgpackSerializer
    from tests.fanout_helpers import kill

    record_key = f"test-record-{namespace}"
    hooks = tmp_path / "hooks"
    write_python_hook(hooks, "slow", "slow_first", timeout_s=120, retries=(1, [0]))
    env = worker_env(real_redis_url, namespace, record_key)
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    event = Event(kind="PostToolUse")
    try:
        with processes() as procs:
            procs.append(spawn_worker("fanout", hooks, env))
            first = spawn_worker("rq", hooks, env)
            procs.append(first)
            eventlog.publish(real_redis, settings, event)
            wait_for(
                lambda: real_redis.hget(f"{record_key}:tries", "slow") == b"1",
                20,
                "the slow job to start",
            )
            kill(first)  # an infrastructure fault, not the hook's
            procs.append(spawn_worker("rq", hooks, env))
            wait_for(
                lambda: real_redis.hget(record_key, f"slow|{event.id}") == b"1",
                45,
                "the job to run again",
            )
        job = HookJob.fetch(
            job_id_for(event.id, "slow"), connection=real_redis, serializer=MsgpackSerializer
        )
        assert job.retries_left == 1, "the dead worker spent the hook's declared retry"
    finally:
        real_redis.delete(record_key, f"{record_key}:tries", f"{record_key}:jobs")


CRASHING_HOOK = """
import os


def crash(event):
    os._exit(3)
"""


def test_an_rq_worker_whose_hook_kills_its_process_restarts_and_counts_the_crash(
    tmp_path: Path, real_redis: redis.Redis, real_redis_url: str, namespace: str
) -> None:
    from hookbus.bus.keys import Keys
    from hookbus.workers.fleet.heartbeat import list_workers

    record_key = f"test-record-{namespace}"
    hooks = tmp_path / "hooks"
    write_python_hook(hooks, "alpha", "record")
    crasher = hooks / "crasher"
    crasher.mkdir()
    (crasher / "crash_mod.py").write_text(CRASHING_HOOK)
    (crasher / "HOOK.toml").write_text(
        'name = "crasher"\nevents = ["Stop"]\nblocking = false\n'
        '[action.python]\nentrypoint = "crash_mod:crash"\n'
    )
    env = worker_env(real_redis_url, namespace, record_key)
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    keys = Keys.for_namespace(namespace)
    try:
        with processes() as procs:
            procs.append(spawn_worker("fanout", hooks, env))
            rq_worker = spawn_worker("rq", hooks, env)
            procs.append(rq_worker)
            eventlog.publish(real_redis, settings, Event(kind="Stop"))

            def crashed() -> bool:
                return any(
                    w.role == "rq" and int(w.extra.get("crashes", 0)) >= 1
                    for w in list_workers(real_redis, keys)
                )

            wait_for(crashed, 30, "the crash to be counted by a restarted worker")
            assert rq_worker.poll() is None, "a hook calling os._exit took the RQ role down"
            after = Event(kind="PostToolUse")
            eventlog.publish(real_redis, settings, after)
            wait_for(
                lambda: real_redis.hget(record_key, f"alpha|{after.id}") == b"1",
                30,
                "the restarted worker to run the next job",
            )
    finally:
        real_redis.delete(record_key, f"{record_key}:tries", f"{record_key}:jobs")


@pytest.mark.parametrize("after_s", [0.0, 0.5], ids=["as-it-starts", "idle"])
def test_an_idle_rq_worker_stops_at_once_on_sigterm(
    tmp_path: Path, real_redis: redis.Redis, real_redis_url: str, namespace: str, after_s: float
) -> None:
    """Also a SIGTERM that comes as the worker starts (its heartbeat runs before RQ has
    installed its own signal handlers, while its scheduler is being forked)."""
    import signal
    import subprocess

    from hookbus.bus.keys import Keys
    from hookbus.workers.fleet.heartbeat import list_workers

    hooks = tmp_path / "hooks"
    write_python_hook(hooks, "alpha", "record")
    env = worker_env(real_redis_url, namespace, f"test-record-{namespace}")
    keys = Keys.for_namespace(namespace)
    with processes() as procs:
        rq_worker = spawn_worker("rq", hooks, env)
        procs.append(rq_worker)
        wait_for(
            lambda: any(w.role == "rq" for w in list_workers(real_redis, keys)),
            20,
            "the worker's heartbeat",
        )
        time.sleep(after_s)
        rq_worker.send_signal(signal.SIGTERM)
        try:
            assert rq_worker.wait(5) == 0
        except subprocess.TimeoutExpired:
            raise AssertionError("an idle RQ worker did not stop within 5 s of SIGTERM") from None
    assert not any(w.role == "rq" for w in list_workers(real_redis, keys))
