"""The SDK's failure paths that need no worker: policy decisions, strict errors, the
liveness cache, import hygiene. Round trips through real workers are integration tests."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time

import fakeredis
import pytest

from hookbus import AsyncHookBus, HookBus
from hookbus.bus import reqrep
from hookbus.bus.embedded import free_port
from hookbus.bus.keys import Keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event, decode, now_ms
from hookbus.errors import (
    KindCannotBlock,
    NoWorkerAlive,
    RedisUnavailable,
    RequestTimeout,
)


def _dead_url() -> str:
    return f"redis://127.0.0.1:{free_port()}/0"


def test_with_no_worker_heartbeat_the_policy_answers_at_once(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    bus = HookBus(Settings(namespace="cl"), client=fake_redis)
    started = time.monotonic()
    decision = bus.request(Event(kind="PreToolUse"), deadline_ms=5_000)
    assert time.monotonic() - started < 0.5
    assert decision.degraded is True
    assert decision.outcome == "deny"
    assert decision.reason == (
        "no chain worker alive (no heartbeat in namespace 'cl' at redis://127.0.0.1:6379/0); "
        "policy deny"
    )
    assert fake_redis.xlen(Keys.for_namespace("cl").requests) == 0
    assert bus.degraded_answers == {"no_worker": 1}


def test_non_guard_kinds_default_to_allow(fake_redis: fakeredis.FakeRedis) -> None:
    bus = HookBus(Settings(namespace="cl"), client=fake_redis)
    decision = bus.request(Event(kind="PromptSubmit", payload={"prompt": "hi"}))
    assert decision.outcome == "allow"
    assert decision.degraded is True


def test_a_strict_request_raises_no_worker_alive(fake_redis: fakeredis.FakeRedis) -> None:
    bus = HookBus(Settings(namespace="cl"), client=fake_redis)
    with pytest.raises(NoWorkerAlive, match="no chain worker alive"):
        bus.request(Event(kind="PreToolUse"), strict=True)


def test_a_stale_heartbeat_counts_as_no_worker(fake_redis: fakeredis.FakeRedis) -> None:
    keys = Keys.for_namespace("cl")
    entry = {"id": "old", "role": "chain", "last_ms": now_ms() - 60_000}
    fake_redis.hset(keys.workers, "old", json.dumps(entry))
    fake_redis.hset(keys.workers, "rq", json.dumps({"id": "rq", "role": "rq", "last_ms": now_ms()}))
    bus = HookBus(Settings(namespace="cl"), client=fake_redis)
    assert bus.workers_alive() is False


def test_the_liveness_answer_is_cached_between_requests(fake_redis: fakeredis.FakeRedis) -> None:
    keys = Keys.for_namespace("cl")
    bus = HookBus(Settings(namespace="cl"), client=fake_redis)
    fake_redis.hset(
        keys.workers, "w", json.dumps({"id": "w", "role": "chain", "last_ms": now_ms()})
    )
    assert bus.workers_alive() is True
    fake_redis.delete(keys.workers)
    assert bus.workers_alive() is True  # cached for about a second
    bus._liveness.until = 0.0
    assert bus.workers_alive() is False


@pytest.mark.parametrize("deadline_ms", [30, 120])
@pytest.mark.timing
def test_with_redis_unreachable_the_policy_answers_within_the_deadline(deadline_ms: int) -> None:
    bus = HookBus(Settings(namespace="cl", redis_url=_dead_url()))
    started = time.monotonic()
    decision = bus.request(Event(kind="PreToolUse"), deadline_ms=deadline_ms)
    assert (time.monotonic() - started) * 1000 < deadline_ms + 15
    assert decision.degraded is True
    assert decision.outcome == "deny"
    assert decision.reason is not None and decision.reason.startswith("Redis unreachable")
    bus.close()


def test_a_strict_request_raises_redis_unavailable() -> None:
    with (
        HookBus(Settings(namespace="cl", redis_url=_dead_url())) as bus,
        pytest.raises(RedisUnavailable),
    ):
        bus.request(Event(kind="PreToolUse"), strict=True)


def test_caller_mistakes_raise_even_without_strict(fake_redis: fakeredis.FakeRedis) -> None:
    bus = HookBus(Settings(namespace="cl"), client=fake_redis)
    with pytest.raises(KindCannotBlock):
        bus.request(Event(kind="SessionEnd"))


def test_from_url_takes_url_and_namespace_over_configuration() -> None:
    bus = HookBus.from_url("redis://127.0.0.1:1/0", "elsewhere")
    assert bus.settings.namespace == "elsewhere"
    assert bus.url == "redis://127.0.0.1:1/0"
    bus.close()


@pytest.mark.timing
async def test_the_async_client_applies_the_policy_with_redis_unreachable() -> None:
    async with AsyncHookBus(Settings(namespace="cl", redis_url=_dead_url())) as bus:
        started = time.monotonic()
        decision = await bus.request(Event(kind="PreToolUse"), deadline_ms=80)
        assert (time.monotonic() - started) * 1000 < 95
        assert decision.degraded is True
        assert decision.outcome == "deny"
        with pytest.raises(RedisUnavailable):
            await bus.request(Event(kind="PreToolUse"), deadline_ms=80, strict=True)


async def test_the_async_client_answers_no_worker_at_once() -> None:
    client = fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer(), protocol=2)
    async with AsyncHookBus(Settings(namespace="cl"), client=client) as bus:
        decision = await bus.request(Event(kind="PermissionRequest"), deadline_ms=5_000)
        assert decision.reason == (
            "no chain worker alive (no heartbeat in namespace 'cl' at redis://127.0.0.1:6379/0); "
            "policy deny"
        )
        with pytest.raises(NoWorkerAlive):
            await bus.request(Event(kind="PreToolUse"), strict=True)
    await client.aclose()


def test_strict_timeouts_are_request_timeout_errors() -> None:
    assert issubclass(RequestTimeout, Exception)
    assert asyncio.iscoroutinefunction(AsyncHookBus.request)


def test_the_producer_path_imports_no_typer_rich_rq_or_pydantic() -> None:
    code = (
        "import sys, hookbus\n"
        "bus = hookbus.HookBus.from_url('redis://127.0.0.1:1/0', 'x')\n"
        "abus = hookbus.AsyncHookBus.from_url('redis://127.0.0.1:1/0', 'x')\n"
        "bad = [m for m in ('typer', 'rich', 'rq', 'pydantic', 'pydantic_settings')"
        " if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == ""


def test_importing_the_sync_client_imports_no_redis_py_until_a_client_is_built() -> None:
    code = (
        "import json, sys\n"
        "from hookbus import HookBus\n"
        "before = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('redis', 'typer', 'rich', 'rq', 'pydantic', 'pydantic_settings'))\n"
        "HookBus.from_url('redis://127.0.0.1:1/0', 'x').close()\n"
        "print(json.dumps([before, 'redis' in sys.modules]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    before, after = json.loads(out.stdout.strip().splitlines()[-1])
    assert before == []  # neither redis nor redis.asyncio (redis-py 8 imports both at once)
    assert after is True  # loaded when the client was built


def test_publish_appends_non_blocking_events_to_the_event_log(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    bus = HookBus(Settings(namespace="cl"), client=fake_redis)
    first = bus.publish(Event(kind="on_session_end"))
    more = bus.publish_many([Event(kind="Notification"), Event(kind="PostToolUse")])
    entries = fake_redis.xrange(Keys.for_namespace("cl").events)
    assert [decode(e[1][b"e"], Event).id for e in entries] == [first, *more]


async def test_the_async_client_publishes_too() -> None:
    client = fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer(), protocol=2)
    async with AsyncHookBus(Settings(namespace="cl"), client=client) as bus:
        await bus.publish(Event(kind="SessionEnd"))
        await bus.publish_many([Event(kind="Notification")])
        assert await client.xlen(Keys.for_namespace("cl").events) == 2
    await client.aclose()


def _fake_worker(client: fakeredis.FakeRedis, ns: str) -> None:
    entry = {"id": "w", "role": "chain", "last_ms": now_ms()}
    client.hset(Keys.for_namespace(ns).workers, "w", json.dumps(entry))


def test_an_undecodable_reply_is_a_policy_decision(
    fake_redis: fakeredis.FakeRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_worker(fake_redis, "cl")
    event = Event(kind="PreToolUse")
    monkeypatch.setattr(reqrep, "new_request_id", lambda: "r1")
    bus = HookBus(Settings(namespace="cl"), client=fake_redis)
    conn = bus._pool.take()  # the connection the request will use, and its reply inbox
    inbox = bus._inbox_of(conn, bus._lanes[0].inbox_prefix)
    bus._pool.give_back(conn)
    fake_redis.xadd(inbox.key, {"id": "r1", "d": b"\xc1 not msgpack"})
    decision = bus.request(event, deadline_ms=500, on_timeout="allow")
    assert decision.degraded is True
    assert decision.outcome == "allow"
    assert decision.reason is not None
    assert decision.reason.startswith("the reply could not be decoded")


def test_a_forked_child_does_not_reuse_the_parent_s_request_connections(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    bus = HookBus(Settings(namespace="cl"), client=fake_redis)
    conn = bus._pool.take()
    bus._pool.give_back(conn)
    bus._pool._pid = -1  # as seen from a child after fork
    assert bus._pool.take() is not conn
