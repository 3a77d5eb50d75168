"""Failure paths with real processes: a worker SIGKILLed mid-chain, Redis stopped and
restarted under running workers and producers."""

from __future__ import annotations

import asyncio
import threading
import time

import redis

from hookbus import AsyncHookBus, HookBus
from hookbus.bus.embedded import EmbeddedServer
from hookbus.bus.keys import CHAIN_GROUP, Keys
from hookbus.bus.wire import Decision
from tests.blocking_helpers import WorkerProc, bash, settings_for, wait_for


def _pending(client: redis.Redis, ns: str) -> int:
    return int(client.xpending(Keys.for_namespace(ns).requests, CHAIN_GROUP)["pending"])


def test_a_request_whose_worker_is_sigkilled_mid_chain_is_reclaimed_and_answered(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    doomed = WorkerProc(real_redis_url, namespace, hang=True)
    rescuer: WorkerProc | None = None
    try:
        doomed.wait_ready(real_redis)
        with HookBus(settings_for(real_redis_url, namespace)) as bus:
            box: list[tuple[Decision, float]] = []

            def ask() -> None:
                started = time.monotonic()
                decision = bus.request(bash("ls", "hang_here"), deadline_ms=8_000)
                box.append((decision, time.monotonic() - started))

            asker = threading.Thread(target=ask)
            asker.start()
            wait_for(lambda: _pending(real_redis, namespace), what="the request to be taken")
            doomed.kill()
            rescuer = WorkerProc(real_redis_url, namespace)
            rescuer.wait_ready(real_redis)
            asker.join(15)
        ((decision, elapsed_s),) = box
        assert decision.degraded is False
        assert decision.worker == rescuer.worker_id
        assert elapsed_s < 8.0
        # the rescuer acknowledges in bulk, within its ack ledger's 0.1 s
        wait_for(lambda: _pending(real_redis, namespace) == 0, what="the entry acknowledged")
    finally:
        doomed.kill()
        if rescuer is not None:
            rescuer.kill()


def test_a_request_whose_only_worker_is_sigkilled_gets_the_policy_at_its_deadline(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    doomed = WorkerProc(real_redis_url, namespace, hang=True)
    try:
        doomed.wait_ready(real_redis)
        with HookBus(settings_for(real_redis_url, namespace)) as bus:
            box: list[tuple[Decision, float]] = []

            def ask() -> None:
                started = time.monotonic()
                decision = bus.request(bash("ls", "hang_here"), deadline_ms=400)
                box.append((decision, (time.monotonic() - started) * 1000))

            asker = threading.Thread(target=ask)
            asker.start()
            wait_for(lambda: _pending(real_redis, namespace), what="the request to be taken")
            doomed.kill()
            asker.join(5)
        ((decision, elapsed_ms),) = box
        assert decision.degraded is True
        reason = decision.reason or ""
        assert reason.startswith("no chain worker answered within 400 ms (")
        assert f"namespace '{namespace}'" in reason and reason.endswith("; policy deny")
        assert 400 <= elapsed_ms <= 415
    finally:
        doomed.kill()


def test_with_redis_stopped_the_policy_answers_then_everything_recovers_without_restarts(
    namespace: str,
) -> None:
    server = EmbeddedServer()
    server.start()
    port = server.port
    client = redis.Redis.from_url(server.url, protocol=2)
    worker = WorkerProc(server.url, namespace)
    try:
        worker.wait_ready(client)
        with HookBus(settings_for(server.url, namespace)) as bus:
            # the first request to a fresh worker on a fresh server is answered at once
            # (the reply script is loaded at start, not discovered missing mid-batch)
            started = time.monotonic()
            assert bus.request(bash("ls"), deadline_ms=2_000).degraded is False
            assert time.monotonic() - started < 0.2

            server.stop()
            for deadline_ms in (50, 200):
                started = time.monotonic()
                decision = bus.request(bash("ls"), deadline_ms=deadline_ms)
                elapsed_ms = (time.monotonic() - started) * 1000
                assert decision.degraded is True
                assert decision.outcome == "deny"
                assert elapsed_ms <= deadline_ms + 15
                assert decision.reason is not None
                assert decision.reason.endswith("policy deny")

            server = EmbeddedServer(port=port)
            server.start()

            def answered() -> Decision | None:
                decision = bus.request(bash("ls"), deadline_ms=500)
                return None if decision.degraded else decision

            decision = wait_for(answered, timeout_s=20, what="the worker to come back")
            assert decision.worker == worker.worker_id  # the same process: no restart
            assert worker.proc.poll() is None
    finally:
        worker.kill()
        client.close()
        server.stop()


async def test_the_async_client_rides_out_a_redis_restart_with_the_same_inbox(
    namespace: str,
) -> None:
    server = EmbeddedServer()
    server.start()
    port = server.port
    client = redis.Redis.from_url(server.url, protocol=2)
    worker = WorkerProc(server.url, namespace)
    try:
        worker.wait_ready(client)
        async with AsyncHookBus(settings_for(server.url, namespace)) as bus:
            assert (await bus.request(bash("ls"), deadline_ms=2_000)).degraded is False

            server.stop()
            started = time.monotonic()
            decision = await bus.request(bash("ls"), deadline_ms=150)
            assert (time.monotonic() - started) * 1000 <= 165
            assert decision.degraded is True and decision.outcome == "deny"

            server = EmbeddedServer(port=port)
            server.start()
            end = time.monotonic() + 20
            while time.monotonic() < end:
                decision = await bus.request(bash("ls"), deadline_ms=500)
                if not decision.degraded:
                    break
                await asyncio.sleep(0.05)
            assert decision.degraded is False
            assert decision.worker == worker.worker_id
    finally:
        worker.kill()
        client.close()
        server.stop()
