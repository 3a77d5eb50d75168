"""Issue 12 row 7 (worker side): a hook that times out or fails is counted per hook in the
chain worker's heartbeat, so ``hookbus status --json`` names it."""

from __future__ import annotations

import threading
import time
from typing import Any

import redis

from hookbus.bus import reqrep
from hookbus.bus.keys import Keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Decision, Event, decode, encode, now_ms
from hookbus.hooks.registry import HookRegistry
from hookbus.workers.chain.worker import run_chain_worker
from hookbus.workers.fleet.heartbeat import list_workers


def test_timeouts_and_errors_are_counted_per_hook_in_the_heartbeat(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    keys = Keys.for_namespace(namespace)
    registry = HookRegistry.from_settings(settings)

    def hangs(event: Event) -> None:
        time.sleep(2)

    def fails(event: Event) -> None:
        raise RuntimeError("broken on purpose")

    registry.register("hangs", hangs, events=["PreToolUse"], isolate=True, timeout_s=0.1)
    registry.register("fails", fails, events=["PreToolUse"])
    stop = threading.Event()
    thread = threading.Thread(
        target=run_chain_worker,
        args=(settings,),
        kwargs={"registry": registry, "stop_event": stop},
        daemon=True,
    )
    thread.start()
    try:
        for _ in range(2):
            event = Event(kind="PreToolUse", deadline=now_ms() + 3_000)
            event.reply_to = keys.reply(event.id)
            real_redis.xadd(keys.requests, {reqrep.REQUEST_FIELD: encode(event)})
            popped: Any = real_redis.blpop([event.reply_to], timeout=4)
            assert popped is not None
            trace = {run.hook_id: run.outcome for run in decode(popped[1], Decision).trace}
            assert trace == {"hangs": "timeout", "fails": "error"}

        def counted() -> dict[str, Any]:
            for w in list_workers(real_redis, keys):
                if w.role == "chain":
                    return dict(w.extra.get("hook_failures") or {})
            return {}

        end = time.monotonic() + 5
        while time.monotonic() < end and not counted():
            time.sleep(0.1)
        assert counted() == {"hangs": {"timeout": 2}, "fails": {"error": 2}}
    finally:
        stop.set()
        thread.join(10)
