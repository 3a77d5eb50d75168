"""Redis up but refusing writes: out of memory (maxmemory under noeviction) or out of disk
(a failed RDB save with stop-writes-on-bgsave-error). Each on a private redis-server.

* The RQ worker backs off for real (a Redis that refuses writes answers PING at once, so
  waiting for PING alone restarted it thousands of times a second), logging one warning
  per kind of failure.
* Callers are told at once what Redis refused, not "no chain worker alive" (the workers
  are up; their heartbeats are what Redis refuses).
* ``hookbus status`` reads without writing, and says what Redis refused.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hookbus import AsyncHookBus, HookBus
from hookbus.bus.connection import close_pools
from hookbus.bus.keys import Keys
from hookbus.bus.settings.loader import load_settings
from hookbus.bus.wire import Event
from tests.cluster_fixture import LocalServer, local_server
from tests.worst_day_helpers import (
    REFUSAL_SERVER_ARGS,
    ROOT,
    chain_workers,
    fail_writes,
    heal_writes,
)

KINDS = ["OOM", "MISCONF"]
#: How long the RQ worker is watched while Redis refuses writes, and the most restarts
#: it may make meanwhile, in s.
WATCH_S, MOST_RESTARTS = 20.0, 20


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with local_server(*REFUSAL_SERVER_ARGS) as started:
        yield started
    close_pools()


def hookbus_env(url: str, ns: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env.update(HOOKBUS_REDIS_URL=url, HOOKBUS_NAMESPACE=ns, **extra)
    return env


def hookbus_cmd() -> list[str]:
    import sys

    return [sys.executable, "-m", "hookbus"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_rq_worker_backs_off_while_redis_refuses_writes(
    server: LocalServer, kind: str, tmp_path: Path
) -> None:
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    env = hookbus_env(server.url, "refuse", HOOKBUS_LOG_LEVEL="DEBUG")
    proc = subprocess.Popen(
        [*hookbus_cmd(), "worker", "--role", "rq", "-d", str(hooks)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    client = server.client()
    try:
        end = time.monotonic() + 20
        while not client.hlen(Keys.for_namespace("refuse").workers):
            assert time.monotonic() < end, "the RQ worker did not start"
            time.sleep(0.05)
        fail_writes(client, kind, server.folder)
        time.sleep(WATCH_S)
        heal_writes(client, kind, server.folder)
        served_again = _wait_for_rq_registration(client, timeout_s=15)
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=30)
        client.close()
    lines = stderr.splitlines()
    restarts = [line for line in lines if "stopped serving" in line or " restart " in line]
    warnings = [line for line in restarts if " WARNING " in line]
    assert 0 < len(restarts) < MOST_RESTARTS, f"{len(restarts)} restarts in {WATCH_S:g} s"
    assert len(warnings) <= 2, warnings
    assert kind in warnings[0]
    assert served_again, "the RQ worker did not serve again once Redis took writes"


def _wait_for_rq_registration(client: object, timeout_s: float) -> bool:
    """Whether an RQ worker registers (``rq:workers``) within ``timeout_s``."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if client.scard("rq:workers"):  # type: ignore[attr-defined]
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("kind", KINDS)
def test_callers_are_told_at_once_what_redis_refused(server: LocalServer, kind: str) -> None:
    overrides = {"redis_url": server.url, "namespace": "refuse"}
    settings = load_settings(overrides={**overrides, "workers": {"dead_after_ms": 2_000}})
    bus = HookBus(settings.settings)
    client = server.client()
    with chain_workers(server.url, "refuse"):
        assert not bus.request(Event(kind="PreToolUse"), deadline_ms=2_000).degraded
        fail_writes(client, kind, server.folder)
        time.sleep(3.0)  # the heartbeats, refused, are older than dead_after_ms now

        async def async_answers() -> list[tuple[float, str]]:
            abus = AsyncHookBus(settings.settings)
            try:
                out = []
                for _ in range(10):
                    sent = time.monotonic()
                    d = await abus.request(Event(kind="PreToolUse"), deadline_ms=1_000)
                    assert d.degraded
                    out.append((time.monotonic() - sent, d.reason or ""))
                return out
            finally:
                await abus.close()

        answers = []
        for _ in range(10):
            sent = time.monotonic()
            d = bus.request(Event(kind="PreToolUse"), deadline_ms=1_000)
            assert d.degraded
            answers.append((time.monotonic() - sent, d.reason or ""))
        answers += asyncio.run(async_answers())
        heal_writes(client, kind, server.folder)
        end = time.monotonic() + 10
        while bus.request(Event(kind="PreToolUse"), deadline_ms=1_000).degraded:
            assert time.monotonic() < end, "requests still degraded once Redis took writes"
            time.sleep(0.1)
    bus.close()
    client.close()
    reasons = {reason for _, reason in answers}
    assert all(kind in reason and "refuses writes" in reason for reason in reasons), reasons
    assert not any("no chain worker" in reason for reason in reasons), reasons
    slowest = max(took for took, _ in answers)
    assert slowest < 0.5, f"a caller waited {slowest:.2f} s to be told"


@pytest.mark.parametrize("kind", KINDS)
def test_status_reads_without_writing_and_says_what_redis_refused(
    server: LocalServer, kind: str
) -> None:
    from rq import Queue

    client = server.client()
    keys = Keys.for_namespace("refuse")
    long_dead = {"id": "gone", "role": "chain", "last_ms": 1, "started_ms": 1}
    client.hset(keys.workers, "gone", json.dumps(long_dead))  # status would prune it
    queue = Queue(keys.rq_queue, connection=client)
    job = queue.enqueue("os.getcwd")
    expired = {job.id: time.time() - 60}  # RQ's own counts would clean these up: writes
    client.zadd(queue.failed_job_registry.key, expired)
    client.zadd(queue.started_job_registry.key, expired)
    fail_writes(client, kind, server.folder)
    env = hookbus_env(server.url, "refuse")
    as_json = subprocess.run(
        [*hookbus_cmd(), "--json", "status"], env=env, cwd=ROOT, capture_output=True, text=True
    )
    for_people = subprocess.run(
        [*hookbus_cmd(), "status"], env=env, cwd=ROOT, capture_output=True, text=True
    )
    heal_writes(client, kind, server.folder)
    client.close()
    # its only worker is long gone: no chain worker alive, exit 69, the report all the same
    assert as_json.returncode == 69, as_json.stdout + as_json.stderr
    data = json.loads(as_json.stdout)
    assert kind in data["refused"] and "refuses writes" in data["refused"]
    assert [q["failed"] for q in data["queues"]] == [1]
    assert [w["id"] for w in data["workers"]] == ["gone"]  # not pruned: that would write
    assert for_people.returncode == 69, for_people.stderr
    assert "refuses writes" in for_people.stdout


@pytest.mark.parametrize("kind", KINDS)
def test_a_pack_s_progress_refused_by_redis_is_recorded_once_it_takes_writes(
    server: LocalServer, kind: str
) -> None:
    """An event's outcome refused by Redis is written again until Redis takes writes, and
    the pack waits for it before its next event: a rerun of the pack (its worker then died
    on the refusal, as RQ's own writes fail too) does not run that event again."""
    import threading

    from hookbus.workers.fanout.pack_log import PackLog

    client = server.client()
    plog = PackLog(client, "refuse-packs:log", "refuse-packs")
    assert plog.open(3).done == 0
    fail_writes(client, kind, server.folder)
    healer = threading.Timer(0.5, heal_writes, args=(server.client(), kind, server.folder))
    healer.start()
    started = time.monotonic()
    plog.outcome(0, b"record of event 0")  # refused, then written once Redis takes writes
    assert time.monotonic() - started >= 0.4
    healer.join()
    state = plog.open(3)
    assert (state.done, state.records, state.kills) == (1, {0: b"record of event 0"}, 1)
    client.close()
