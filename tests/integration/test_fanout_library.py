"""The fan-out entry points used as a library: code-registered hooks, in-process workers."""

from __future__ import annotations

import threading
from typing import Any

import redis

from hookbus.bus import decision_batch, eventlog, keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event
from hookbus.hooks.registry import HookRegistry
from hookbus.workers.fanout import jobs
from hookbus.workers.fanout.role import run_dispatcher
from hookbus.workers.fanout.rq_classes import make_worker
from hookbus.workers.fleet.heartbeat import list_workers
from tests.fanout_helpers import queued_events, wait_for


def test_a_static_hook_runs_through_run_dispatcher_and_an_in_process_worker(
    real_redis: redis.Redis, real_redis_url: str, namespace: str
) -> None:
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    seen: list[str] = []
    registry = HookRegistry(settings.catalogue())

    @registry.hook("PostToolUse")
    def telemetry(event: Event) -> None:
        seen.append(event.id)

    stop = threading.Event()
    thread = threading.Thread(
        target=run_dispatcher, args=(settings,), kwargs={"registry": registry, "stop_event": stop}
    )
    thread.start()
    k = keys.Keys.for_namespace(namespace)
    try:
        wait_for(
            lambda: any(w.role == "fanout" for w in list_workers(real_redis, k)),
            10,
            "the dispatcher's heartbeat",
        )
        events = [Event(kind="PostToolUse", payload={"i": i}) for i in range(5)]
        eventlog.publish_many(real_redis, settings, events)
        wait_for(lambda: queued_events(real_redis, namespace) == 5, 10, "five events' jobs")
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()
    assert not any(w.role == "fanout" for w in list_workers(real_redis, k))  # clean stop

    ctx: Any = jobs.JobContext(settings=settings, registry=registry, bus=real_redis, keys=k)
    jobs.install(ctx)
    try:
        worker = make_worker(settings, isolation="none", connection=real_redis)
        worker.work(burst=True, logging_level="WARNING")
    finally:
        jobs.uninstall()
    assert sorted(seen) == sorted(e.id for e in events)
    # one run record per event (a pack logs its runs in one batch entry)
    assert len(decision_batch.logged(real_redis, k.decisions)) == 5


def test_the_sdk_publishes_through_the_event_log(
    real_redis: redis.Redis, real_redis_url: str, namespace: str
) -> None:
    import asyncio

    from hookbus import AsyncHookBus, HookBus
    from hookbus.bus.wire import decode

    with HookBus.from_url(real_redis_url, namespace) as bus:
        one = bus.publish(Event(kind="on_after_tool_call", payload={"n": 1}))
        many = bus.publish_many([Event(kind="Stop"), Event(kind="SessionEnd")])

    async def publish_async() -> str:
        abus = AsyncHookBus.from_url(real_redis_url, namespace)
        try:
            return await abus.publish(Event(kind="Notification"))
        finally:
            await abus.aclose()

    last = asyncio.run(publish_async())
    entries = real_redis.xrange(keys.events(namespace))
    assert [decode(e[1][b"e"], Event).id for e in entries] == [one, *many, last]
    kinds = [decode(f[b"e"], Event).kind for _, f in entries]
    assert kinds == ["PostToolUse", "Stop", "SessionEnd", "Notification"]
