"""The blocking path end to end: real Redis, real chain worker processes.

Workers run as subprocesses (``python -c WORKER_CODE``) with static Python hooks whose
behaviour each request's payload selects (``act``), so one worker serves every scenario.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis

from hookbus import AsyncHookBus, HookBus
from hookbus.bus.decision_batch import logged
from hookbus.bus.keys import CHAIN_GROUP, Keys
from hookbus.bus.wire import Decision, Event, now_ms
from hookbus.errors import RedisCommandError
from hookbus.workers.fleet.heartbeat import alive_workers, list_workers
from tests.blocking_helpers import WorkerProc, bash, settings_for, wait_for


@contextmanager
def workers(
    url: str, ns: str, client: redis.Redis, n: int = 1, **kw: Any
) -> Iterator[list[WorkerProc]]:
    procs = [WorkerProc(url, ns, **kw) for _ in range(n)]
    try:
        for proc in procs:
            proc.wait_ready(client)
        yield procs
    finally:
        for proc in procs:
            proc.kill()


# --- decisions through the bus ---------------------------------------------------------


def test_allow_deny_ask_halt_updates_context_and_signals_come_back_through_the_bus(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    with (
        workers(real_redis_url, namespace, real_redis) as (proc,),
        HookBus(settings_for(real_redis_url, namespace)) as bus,
    ):
        allowed = bus.request(bash("ls"), deadline_ms=2_000)
        assert allowed.outcome == "allow"
        assert allowed.degraded is False
        assert allowed.worker == proc.worker_id
        assert allowed.context == ["saw ls"]
        assert [(s.kind, s.code) for s in allowed.signals] == [("ability_guard", "checked")]
        assert [run.hook_id for run in allowed.trace] == ["stuck", "guard", "annotate"]

        denied = bus.request(bash("rm -rf /", "deny"), deadline_ms=2_000)
        assert (denied.outcome, denied.reason) == ("deny", "guard says no")
        assert bus.request(bash("x", "ask"), deadline_ms=2_000).outcome == "ask"
        halted = bus.request(bash("x", "halt"), deadline_ms=2_000)
        assert (halted.outcome, halted.reason) == ("halt", "stop the session")

        rewritten = bus.request(bash("rm -rf /", "rewrite"), deadline_ms=2_000)
        assert rewritten.outcome == "allow"
        assert rewritten.updated["tool_input"] == {"command": "ls -la"}
        assert rewritten.context == ["saw ls -la"]  # the update applied before the next hook

        permission = bus.request(
            Event(kind="PermissionRequest", payload={"act": "deny"}), deadline_ms=2_000
        )
        assert permission.outcome == "deny"
        # logged in bulk by the worker's ack ledger, within about 0.1 s
        log = wait_for(
            lambda: (
                (found := logged(real_redis, Keys.for_namespace(namespace).decisions))
                and len(found) == 6
                and found
            ),
            what="six decisions in the log",
        )
    assert len(log) == 6
    assert {fields[b"worker"] for fields in log} == {proc.worker_id.encode()}


def test_the_async_client_gets_the_same_decisions(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    async def run() -> list[Decision]:
        async with AsyncHookBus(settings_for(real_redis_url, namespace)) as bus:
            return list(
                await asyncio.gather(
                    bus.request(bash("ls"), deadline_ms=2_000),
                    bus.request(bash("rm -rf /", "deny"), deadline_ms=2_000),
                    bus.request(bash("rm", "rewrite"), deadline_ms=2_000),
                )
            )

    with workers(real_redis_url, namespace, real_redis):
        allowed, denied, rewritten = asyncio.run(run())
    assert allowed.outcome == "allow" and allowed.context == ["saw ls"]
    assert (denied.outcome, denied.reason) == ("deny", "guard says no")
    assert rewritten.updated["tool_input"] == {"command": "ls -la"}


@pytest.mark.timing
def test_a_hung_hook_is_answered_by_its_on_error_within_the_deadline(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    with (
        workers(real_redis_url, namespace, real_redis),
        HookBus(settings_for(real_redis_url, namespace)) as bus,
    ):
        started = time.monotonic()
        decision = bus.request(bash("ls", "hang_hook"), deadline_ms=300, on_timeout="allow")
        elapsed_ms = (time.monotonic() - started) * 1000
    assert elapsed_ms < 315
    # the hook's on_error decided (deny), not the bus policy (allow); a hook past its timeout
    # flags the decision degraded and names itself (issue 12 row 7)
    assert decision.degraded is True
    assert decision.outcome == "deny"
    assert decision.reason is not None and "stuck" in decision.reason
    assert decision.trace[0].hook_id == "stuck"
    assert decision.trace[0].outcome == "timeout"


# --- deadlines ------------------------------------------------------------------------


@pytest.mark.parametrize("deadline_ms", [50, 100, 250])
@pytest.mark.timing
def test_a_request_to_a_hung_worker_returns_within_15_ms_after_its_deadline(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, deadline_ms: int
) -> None:
    settings = settings_for(real_redis_url, namespace)
    with workers(real_redis_url, namespace, real_redis) as (proc,), HookBus(settings) as bus:
        assert bus.request(bash("ls"), deadline_ms=2000).degraded is False
        # the worker hangs whole (a slow hook no longer holds its read loop): its heartbeat
        # is still fresh, so every request waits in vain until its deadline
        (beat,) = [w for w in list_workers(real_redis, proc.keys) if w.pid == proc.proc.pid]
        serving = int(beat.extra.get("worker_pid") or proc.proc.pid)  # its forked child
        os.kill(serving, signal.SIGSTOP)
        overshoot: list[float] = []
        for _ in range(3):
            started = time.monotonic()
            decision = bus.request(bash("ls"), deadline_ms=deadline_ms)
            overshoot.append((time.monotonic() - started) * 1000 - deadline_ms)
            assert decision.degraded is True
            assert decision.reason == (
                f"no chain worker answered within {deadline_ms} ms "
                f"(namespace '{namespace}' at {real_redis_url}); policy deny"
            )

        async def async_overshoot() -> float:
            async with AsyncHookBus(settings) as abus:
                await abus.workers_alive()
                started = time.monotonic()
                decision = await abus.request(bash("ls"), deadline_ms=deadline_ms)
                assert decision.degraded is True
                return (time.monotonic() - started) * 1000 - deadline_ms

        try:
            overshoot.append(asyncio.run(async_overshoot()))
        finally:
            os.kill(serving, signal.SIGCONT)
    assert all(-1 <= ms <= 15 for ms in overshoot), overshoot


@pytest.mark.timing
def test_with_no_worker_the_policy_answers_well_before_the_deadline(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    with HookBus(settings_for(real_redis_url, namespace)) as bus:
        started = time.monotonic()
        decision = bus.request(bash("ls"), deadline_ms=1_000)
        elapsed_ms = (time.monotonic() - started) * 1000
    assert elapsed_ms < 50
    assert decision.degraded is True
    assert decision.outcome == "deny"
    assert "no chain worker alive" in (decision.reason or "")


def test_a_refused_request_command_is_a_policy_decision_not_an_exception(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    keys = Keys.for_namespace(namespace)
    real_redis.hset(
        keys.workers, "w", json.dumps({"id": "w", "role": "chain", "last_ms": now_ms()})
    )
    real_redis.set(keys.requests, "not a stream")
    with HookBus(settings_for(real_redis_url, namespace)) as bus:
        started = time.monotonic()
        decision = bus.request(bash("ls"), deadline_ms=1_000)
        assert time.monotonic() - started < 0.5
        assert decision.degraded is True
        assert decision.reason is not None
        assert decision.reason.startswith("Redis refused the request")
        assert decision.reason.endswith("; policy deny")
        with pytest.raises(RedisCommandError, match="WRONGTYPE"):
            bus.request(bash("ls"), deadline_ms=1_000, strict=True)


def test_a_stalled_worker_s_request_is_answered_by_another_and_only_once(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    keys = Keys.for_namespace(namespace)
    with (
        workers(real_redis_url, namespace, real_redis, n=2) as procs,
        HookBus(settings_for(real_redis_url, namespace)) as bus,
    ):
        box: list[Decision] = []
        event = bash("x", "sleep", sleep_s=0.4)
        asker = threading.Thread(target=lambda: box.append(bus.request(event, deadline_ms=5_000)))
        asker.start()

        def holder() -> WorkerProc | None:
            pending = real_redis.xpending_range(keys.requests, CHAIN_GROUP, "-", "+", 1)
            ids = {p.worker_id.encode(): p for p in procs}
            return ids.get(pending[0]["consumer"]) if pending else None

        stalled = wait_for(holder, what="a worker to take the request")
        # the process running the chain (a supervised worker serves from a child process)
        serving_pid = next(
            int(w.extra.get("worker_pid", w.pid))
            for w in list_workers(real_redis, keys)
            if w.id == stalled.worker_id
        )
        os.kill(serving_pid, signal.SIGSTOP)  # mid-chain: its ownership lease lapses
        try:
            asker.join(10)
        finally:
            os.kill(serving_pid, signal.SIGCONT)
        ((decision,),) = [box]
        assert decision.degraded is False
        assert decision.worker != stalled.worker_id  # the other worker reclaimed it

        def duplicates() -> int:
            for w in list_workers(real_redis, keys):
                if w.id == stalled.worker_id:
                    return int(w.extra.get("duplicates", 0))
            return 0

        # the stalled worker resumes, finishes its run of the chain, and its answer loses
        wait_for(duplicates, timeout_s=10, what="the late answer counted as a duplicate")
        assert real_redis.exists(keys.reply(event.id)) == 0  # no second reply pushed

        def in_log() -> list[dict[bytes, bytes]]:
            records = logged(real_redis, keys.decisions)
            return [f for f in records if f[b"id"] == event.id.encode()]

        # logged in bulk within 0.1 s: wait before the fixture SIGKILLs the workers
        wait_for(in_log, what="the answer in the decision log")
        time.sleep(0.3)  # time for a wrongful second record to show
        assert [f[b"worker"] for f in in_log()] == [decision.worker.encode()]  # type: ignore[union-attr]


# --- load -----------------------------------------------------------------------------


def test_1000_concurrent_requests_from_several_producers_are_each_answered_once(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    settings = settings_for(real_redis_url, namespace)
    results: dict[str, Decision] = {}
    lock = threading.Lock()

    def sync_producer(count: int) -> None:
        with HookBus(settings) as bus:
            for _ in range(count):
                event = bash("ls")
                decision = bus.request(event, deadline_ms=10_000)
                with lock:
                    results[event.id] = decision

    async def async_producer(count: int) -> None:
        async with AsyncHookBus(settings) as bus:
            events = [bash("ls") for _ in range(count)]
            decisions = await asyncio.gather(*(bus.request(e, deadline_ms=10_000) for e in events))
            with lock:
                results.update({e.id: d for e, d in zip(events, decisions, strict=True)})

    with workers(real_redis_url, namespace, real_redis, n=2) as procs:
        threads = [threading.Thread(target=sync_producer, args=(50,)) for _ in range(4)]
        threads += [
            threading.Thread(target=lambda: asyncio.run(async_producer(400))) for _ in range(2)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        # logged in bulk within 0.1 s: wait before the fixture SIGKILLs the workers
        wait_for(
            lambda: len(logged(real_redis, Keys.for_namespace(namespace).decisions)) >= 1_000,
            what="every answer in the decision log",
        )

    assert len(results) == 1_000
    assert all(not d.degraded for d in results.values()), {d.reason for d in results.values()}
    assert len({d.request_id for d in results.values()} - set(results)) == 1_000  # fresh ids
    log = logged(real_redis, Keys.for_namespace(namespace).decisions)
    ids = [fields[b"id"].decode() for fields in log]
    assert sorted(ids) == sorted(results)  # each answered exactly once
    assert {d.worker for d in results.values()} <= {p.worker_id for p in procs}


def test_concurrency_runs_slow_chains_side_by_side(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    settings = settings_for(real_redis_url, namespace)
    decisions: list[Decision] = []

    def ask() -> None:
        with HookBus(settings) as bus:
            decisions.append(bus.request(bash("x", "sleep", sleep_s=0.3), deadline_ms=5_000))

    with workers(real_redis_url, namespace, real_redis, concurrency=4):
        threads = [threading.Thread(target=ask) for _ in range(4)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        elapsed = time.monotonic() - started
    assert len(decisions) == 4
    assert not any(d.degraded for d in decisions)
    assert elapsed < 0.9  # one at a time would take 1.2 s


# --- shutdown -------------------------------------------------------------------------


def test_sigterm_finishes_the_chain_in_flight_then_exits_cleanly(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    keys = Keys.for_namespace(namespace)
    proc = WorkerProc(real_redis_url, namespace)
    try:
        proc.wait_ready(real_redis)
        with HookBus(settings_for(real_redis_url, namespace)) as bus:
            box: list[Decision] = []
            asker = threading.Thread(
                target=lambda: box.append(
                    bus.request(bash("x", "sleep", sleep_s=0.5), deadline_ms=5_000)
                )
            )
            asker.start()
            wait_for(
                lambda: real_redis.xpending(keys.requests, CHAIN_GROUP)["pending"],
                what="the request to be taken",
            )
            proc.proc.send_signal(signal.SIGTERM)
            asker.join(10)
        assert box and box[0].degraded is False and box[0].worker == proc.worker_id
        assert proc.proc.wait(10) == 0
        assert alive_workers(real_redis, keys, dead_after_ms=60_000) == []
        assert real_redis.xpending(keys.requests, CHAIN_GROUP)["pending"] == 0
    finally:
        proc.kill()


def test_a_second_sigint_exits_at_once(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    proc = WorkerProc(real_redis_url, namespace)
    try:
        proc.wait_ready(real_redis)
        with HookBus(settings_for(real_redis_url, namespace)) as bus:
            asker = threading.Thread(
                target=bus.request,
                args=(bash("x", "sleep", sleep_s=20),),
                kwargs={"deadline_ms": 300},
            )
            asker.start()
            wait_for(
                lambda: real_redis.xpending(Keys.for_namespace(namespace).requests, CHAIN_GROUP)[
                    "pending"
                ],
                what="the request to be taken",
            )
            proc.proc.send_signal(signal.SIGINT)
            time.sleep(0.1)
            proc.proc.send_signal(signal.SIGINT)
            assert proc.proc.wait(5) == 130
            asker.join(5)
    finally:
        proc.kill()
