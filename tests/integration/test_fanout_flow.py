"""The non-blocking path end to end: real Redis, real dispatcher and RQ worker processes."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
import redis
import typer
from rq.registry import FailedJobRegistry
from typer.testing import CliRunner

from hookbus.bus import eventlog, keys
from hookbus.bus.keys import FANOUT_GROUP
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event
from hookbus.cli.fleet import dlq as dlq_cli
from tests.fanout_helpers import (
    kill,
    processes,
    queued_events,
    spawn_python,
    spawn_worker,
    wait_for,
    worker_env,
    write_python_hook,
)


@pytest.fixture
def record_key(namespace: str) -> str:
    return keys.namespace_pattern(namespace).rstrip("*") + "test-record"


def _counts(client: redis.Redis, key: str) -> dict[str, int]:
    return {k.decode(): int(v) for k, v in client.hgetall(key).items()}


def _rq_state(client: redis.Redis, ns: str) -> dict[str, object]:
    """What RQ holds for a namespace's queue (for failure messages)."""
    from rq.registry import StartedJobRegistry

    name = keys.rq_queue_name(ns)
    return {
        "queued": client.llen(f"rq:queue:{name}"),
        "started": client.zrange(
            StartedJobRegistry(name, connection=client).key, 0, -1, withscores=True
        ),
        "failed": _failed(client, ns),
        "now": time.time(),
        "workers": sorted(k.decode() for k in client.smembers(f"rq:workers:{name}")),
    }


def _failed(client: redis.Redis, ns: str) -> list[str]:
    return FailedJobRegistry(keys.rq_queue_name(ns), connection=client).get_job_ids()


def test_three_hooks_on_one_event_each_run_once_and_a_failing_one_stops_none(
    real_redis: redis.Redis, real_redis_url: str, namespace: str, tmp_path: Path, record_key: str
) -> None:
    hooks = tmp_path / "hooks"
    write_python_hook(hooks, "alpha", "record")
    write_python_hook(hooks, "beta", "record")
    write_python_hook(hooks, "flaky", "failing")
    env = worker_env(real_redis_url, namespace, record_key)
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    event = Event(kind="PostToolUse", payload={"tool_name": "Bash"})
    with processes() as procs:
        procs.append(spawn_worker("fanout", hooks, env))
        procs.append(spawn_worker("rq", hooks, env, "--isolation", "none"))
        eventlog.publish(real_redis, settings, event)
        wait_for(
            lambda: len(_counts(real_redis, record_key)) == 2 and _failed(real_redis, namespace),
            20,
            "alpha and beta to run and flaky to fail",
        )
    assert _counts(real_redis, record_key) == {f"alpha|{event.id}": 1, f"beta|{event.id}": 1}
    assert len(_failed(real_redis, namespace)) == 1
    runs = [f for _, f in real_redis.xrange(keys.decisions(namespace))]
    outcomes = sorted((f[b"hook"].decode(), f[b"outcome"].decode()) for f in runs)
    assert outcomes == [("alpha", "continue"), ("beta", "continue"), ("flaky", "error")]
    assert real_redis.xpending(keys.events(namespace), FANOUT_GROUP)["pending"] == 0


def test_a_failing_hook_is_retried_as_declared_then_dead_lettered_and_requeued(
    real_redis: redis.Redis, real_redis_url: str, namespace: str, tmp_path: Path, record_key: str
) -> None:
    hooks = tmp_path / "hooks"
    write_python_hook(hooks, "flaky", "failing", retries=(2, [1]))
    env = worker_env(real_redis_url, namespace, record_key)
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    event = Event(kind="PostToolUse")
    runner = CliRunner()
    app = typer.Typer()
    app.add_typer(dlq_cli.app, name="dlq")
    cli_env = {"HOOKBUS_REDIS_URL": real_redis_url, "HOOKBUS_NAMESPACE": namespace}

    def tries() -> int:
        return int(real_redis.hget(record_key + ":tries", "flaky") or 0)

    with processes() as procs:
        procs.append(spawn_worker("fanout", hooks, env))
        procs.append(spawn_worker("rq", hooks, env, "--isolation", "none"))
        eventlog.publish(real_redis, settings, event)
        wait_for(lambda: bool(_failed(real_redis, namespace)), 30, "the job to be dead-lettered")
        assert tries() == 3  # the first run and two retries

        listed = runner.invoke(app, ["dlq", "list", "--json"], env=cli_env)
        assert listed.exit_code == 0, listed.output
        data = json.loads(listed.stdout)
        assert data["total"] == 1
        [dead] = data["jobs"]
        assert (dead["hook"], dead["event"], dead["tries"]) == ("flaky", event.id, 3)
        assert "flaky hook failed on purpose" in dead["error"]

        shown = runner.invoke(app, ["dlq", "show", dead["id"], "--json"], env=cli_env)
        assert shown.exit_code == 0, shown.output
        assert json.loads(shown.stdout)["events_data"][0]["id"] == event.id

        real_redis.set(record_key + ":heal", 1)
        requeued = runner.invoke(app, ["dlq", "requeue", dead["id"]], env=cli_env)
        assert requeued.exit_code == 0, requeued.output
        wait_for(lambda: bool(_counts(real_redis, record_key)), 20, "the requeued job to run")
    assert _counts(real_redis, record_key) == {f"flaky|{event.id}": 1}
    assert _failed(real_redis, namespace) == []
    missing = runner.invoke(app, ["dlq", "show", "hb-nope"], env=cli_env)
    assert missing.exit_code == 1


DYING_DISPATCHER = """
import os, signal
from pathlib import Path
from hookbus.bus.settings.loader import load_settings
from hookbus.workers.fanout import dispatcher, role as fanout

def die(self, plan):
    # die right after the jobs are enqueued, before the entries are acknowledged
    os.kill(os.getpid(), signal.SIGKILL)

dispatcher.Dispatcher._ack = die
fanout.run_dispatcher(load_settings().settings, hooks_dir=Path({hooks!r}))
"""

RESTARTED_DISPATCHER = """
from pathlib import Path
from hookbus.bus.settings.loader import load_settings
from hookbus.workers.fanout import role as fanout
fanout.run_dispatcher(load_settings().settings, hooks_dir=Path({hooks!r}), claim_min_idle_ms=1000)
"""


def test_a_dispatcher_killed_between_enqueue_and_ack_runs_no_hook_twice_after_restart(
    real_redis: redis.Redis, real_redis_url: str, namespace: str, tmp_path: Path, record_key: str
) -> None:
    hooks = tmp_path / "hooks"
    write_python_hook(hooks, "alpha", "record")
    write_python_hook(hooks, "beta", "record")
    env = worker_env(real_redis_url, namespace, record_key)
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    events = [Event(kind="PostToolUse", payload={"i": i}) for i in range(20)]
    eventlog.publish_many(real_redis, settings, events)
    with processes() as procs:
        dying = spawn_python(DYING_DISPATCHER.format(hooks=str(hooks)), env)
        procs.append(dying)
        dying.wait(30)
        assert dying.returncode == -9
        queue = keys.rq_queue_name(namespace)
        assert queued_events(real_redis, namespace) == 40  # enqueued, never acknowledged
        assert real_redis.xpending(keys.events(namespace), FANOUT_GROUP)["pending"] == 20
        procs.append(spawn_python(RESTARTED_DISPATCHER.format(hooks=str(hooks)), env))
        procs.append(spawn_worker("rq", hooks, env, "--isolation", "none"))
        wait_for(
            lambda: real_redis.xpending(keys.events(namespace), FANOUT_GROUP)["pending"] == 0,
            20,
            "the restarted dispatcher to reclaim and acknowledge",
        )
        wait_for(lambda: len(_counts(real_redis, record_key)) == 40, 30, "40 hook runs")
        wait_for(lambda: real_redis.llen(f"rq:queue:{queue}") == 0, 10, "an empty queue")
    counts = _counts(real_redis, record_key)
    assert sorted(counts) == sorted(f"{h}|{e.id}" for h in ("alpha", "beta") for e in events)
    assert set(counts.values()) == {1}


@pytest.mark.parametrize("isolation", ["none", "fork"])
def test_a_job_whose_rq_worker_was_sigkilled_runs_again(
    real_redis: redis.Redis,
    real_redis_url: str,
    namespace: str,
    tmp_path: Path,
    record_key: str,
    isolation: str,
) -> None:
    hooks = tmp_path / "hooks"
    write_python_hook(hooks, "slow", "slow_first", timeout_s=120)
    env = worker_env(real_redis_url, namespace, record_key)
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    event = Event(kind="PostToolUse")

    def tries() -> int:
        return int(real_redis.hget(record_key + ":tries", "slow") or 0)

    with processes() as procs:
        procs.append(spawn_worker("fanout", hooks, env))
        first = spawn_worker("rq", hooks, env, "--isolation", isolation)
        procs.append(first)
        eventlog.publish(real_redis, settings, event)
        wait_for(lambda: tries() == 1, 20, "the slow job to start")
        kill(first)
        procs.append(spawn_worker("rq", hooks, env, "--isolation", isolation))
        wait_for(
            lambda: bool(_counts(real_redis, record_key)),
            45,
            "the job to run again",
            lambda: _rq_state(real_redis, namespace) | {"tries": tries()},
        )
    assert tries() == 2
    assert _counts(real_redis, record_key) == {f"slow|{event.id}": 1}


@pytest.mark.parametrize("isolation", ["none", "fork"])
def test_a_long_job_on_a_live_worker_is_never_taken_for_abandoned(
    real_redis: redis.Redis,
    real_redis_url: str,
    namespace: str,
    tmp_path: Path,
    record_key: str,
    isolation: str,
) -> None:
    hooks = tmp_path / "hooks"
    write_python_hook(hooks, "sleepy", "sleep_six", timeout_s=30)
    env = worker_env(real_redis_url, namespace, record_key)
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    event = Event(kind="PostToolUse")
    with processes() as procs:
        procs.append(spawn_worker("fanout", hooks, env))
        # two workers: the idle one runs maintenance every 2 s while the other is busy
        procs.append(spawn_worker("rq", hooks, env, "--isolation", isolation))
        procs.append(spawn_worker("rq", hooks, env, "--isolation", isolation))
        eventlog.publish(real_redis, settings, event)
        wait_for(
            lambda: bool(_counts(real_redis, record_key)),
            30,
            "the long job to finish",
            lambda: _rq_state(real_redis, namespace),
        )
    assert real_redis.hget(record_key + ":tries", "sleepy") == b"1"
    assert _counts(real_redis, record_key) == {f"sleepy|{event.id}": 1}


def test_ten_thousand_events_with_two_batching_hooks_make_exactly_twenty_thousand_runs(
    real_redis: redis.Redis, real_redis_url: str, namespace: str, tmp_path: Path, record_key: str
) -> None:
    hooks = tmp_path / "hooks"
    write_python_hook(hooks, "alpha", "record", batch=(500, 200))
    write_python_hook(hooks, "beta", "record", batch=(500, 200))
    env = worker_env(real_redis_url, namespace, record_key)
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    events = [Event(kind="PostToolUse", session_id=uuid.uuid4().hex[:6]) for _ in range(10_000)]
    with processes() as procs:
        procs.append(spawn_worker("fanout", hooks, env))
        procs.append(spawn_worker("rq", hooks, env, "--isolation", "none"))
        procs.append(spawn_worker("rq", hooks, env, "--isolation", "none"))
        for start in range(0, len(events), 1000):
            eventlog.publish_many(real_redis, settings, events[start : start + 1000])
        wait_for(lambda: real_redis.hlen(record_key) >= 20_000, 50, "20,000 hook runs")
    counts = _counts(real_redis, record_key)
    assert len(counts) == 20_000
    assert set(counts.values()) == {1}
    assert real_redis.xpending(keys.events(namespace), FANOUT_GROUP)["pending"] == 0
    assert _failed(real_redis, namespace) == []


def test_rq_may_live_on_its_own_redis(
    real_redis: redis.Redis, real_redis_url: str, namespace: str, tmp_path: Path, record_key: str
) -> None:
    from hookbus.bus.embedded import EmbeddedServer

    hooks = tmp_path / "hooks"
    write_python_hook(hooks, "alpha", "record")
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    event = Event(kind="PostToolUse")
    with EmbeddedServer() as rq_server:
        env = worker_env(real_redis_url, namespace, record_key)
        env["HOOKBUS_RQ__REDIS_URL"] = rq_server.url
        rq_client = redis.Redis.from_url(rq_server.url)
        with processes() as procs:
            procs.append(spawn_worker("fanout", hooks, env))
            procs.append(spawn_worker("rq", hooks, env))
            eventlog.publish(real_redis, settings, event)
            wait_for(lambda: bool(_counts(real_redis, record_key)), 20, "the hook to run")
        queue = keys.rq_queue_name(namespace)
        assert rq_client.sismember("rq:queues", f"rq:queue:{queue}")
        assert not real_redis.sismember("rq:queues", f"rq:queue:{queue}")
        rq_client.close()
    assert _counts(real_redis, record_key) == {f"alpha|{event.id}": 1}
