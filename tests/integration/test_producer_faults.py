"""The producer's promises under faults and misuse, on the real server (issue 12 rows 1, 2,
3 and 11, producer side): a decision by deadline + 15 ms whatever Redis does, ``publish``
bounded by its timeout, replies matched to their call, the deadline sent as a budget, and
payloads checked before anything is sent."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import redis

from hookbus import AsyncHookBus, HookBus
from hookbus.bus.keys import Keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Decision, Event
from hookbus.errors import ConfigError, InvalidPayload, RedisUnavailable
from tests.blocking_helpers import WorkerProc
from tests.producer_fault_helpers import ContractWorker, FaultProxy, Reply

ROOT = Path(__file__).resolve().parents[2]
#: What the issue allows past a deadline.
SLACK_MS = 15
DEADLINE_MS = 250

T = TypeVar("T")


def bounded(fn: Callable[[], T], limit_s: float = 5.0) -> tuple[T, float]:
    """``fn()`` and how long it took in ms, run in a thread so a hung call fails the test
    instead of hanging it."""
    box: dict[str, Any] = {}

    def target() -> None:
        started = time.monotonic()
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the test below
            box["error"] = exc
        box["ms"] = (time.monotonic() - started) * 1000

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(limit_s)
    assert not thread.is_alive(), f"the call did not return within {limit_s} s"
    if "error" in box:
        raise box["error"]
    return box["value"], box["ms"]


async def abounded(coro: Any, limit_s: float = 5.0) -> tuple[Any, float]:
    started = time.monotonic()
    value = await asyncio.wait_for(coro, limit_s)
    return value, (time.monotonic() - started) * 1000


def bash(command: str = "ls") -> Event:
    return Event(
        kind="PreToolUse", payload={"tool_name": "Bash", "tool_input": {"command": command}}
    )


def settings_for(url: str, ns: str) -> Settings:
    return Settings(redis_url=url, namespace=ns)


@pytest.fixture
def proxy(real_redis_url: str) -> Iterator[FaultProxy]:
    proxy = FaultProxy(real_redis_url)
    yield proxy
    proxy.close()


@pytest.fixture
def worker(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> Iterator[ContractWorker]:
    worker = ContractWorker(real_redis_url, namespace)
    yield worker
    worker.stop()


def assert_policy_in_time(decision: Decision, elapsed_ms: float, deadline_ms: int) -> None:
    assert decision.degraded is True, decision
    assert decision.outcome == "deny"
    assert elapsed_ms <= deadline_ms + SLACK_MS, f"{elapsed_ms:.1f} ms for {deadline_ms} ms"


# --- row 1: a stalled, slow or resetting Redis ------------------------------------------


@pytest.mark.parametrize("mode", ["stall", "slow", "reset"])
@pytest.mark.timing
def test_the_sync_client_answers_by_policy_within_the_deadline_when_redis_misbehaves(
    mode: str, proxy: FaultProxy, worker: ContractWorker, namespace: str
) -> None:
    with HookBus(settings_for(proxy.url, namespace)) as bus:
        decision, _ = bounded(lambda: bus.request(bash(), deadline_ms=2_000))
        assert decision.degraded is False  # a warm connection, a cached liveness answer
        proxy.set_mode(mode, delay_s=1.0)
        for _ in range(3):  # warm, then the fresh connections that replace dropped ones
            decision, elapsed_ms = bounded(lambda: bus.request(bash(), deadline_ms=DEADLINE_MS))
            assert_policy_in_time(decision, elapsed_ms, DEADLINE_MS)
    with HookBus(settings_for(proxy.url, namespace)) as fresh:
        for deadline_ms in (DEADLINE_MS, 60):
            decision, elapsed_ms = bounded(
                lambda: fresh.request(bash(), deadline_ms=deadline_ms)  # noqa: B023
            )
            assert_policy_in_time(decision, elapsed_ms, deadline_ms)


@pytest.mark.parametrize("mode", ["stall", "slow", "reset"])
@pytest.mark.timing
async def test_the_async_client_answers_by_policy_within_the_deadline_when_redis_misbehaves(
    mode: str, proxy: FaultProxy, worker: ContractWorker, namespace: str
) -> None:
    async with AsyncHookBus(settings_for(proxy.url, namespace)) as bus:
        decision, _ = await abounded(bus.request(bash(), deadline_ms=2_000))
        assert decision.degraded is False
        proxy.set_mode(mode, delay_s=1.0)
        for _ in range(3):
            decision, elapsed_ms = await abounded(bus.request(bash(), deadline_ms=DEADLINE_MS))
            assert_policy_in_time(decision, elapsed_ms, DEADLINE_MS)
    async with AsyncHookBus(settings_for(proxy.url, namespace)) as fresh:
        for deadline_ms in (DEADLINE_MS, 60):
            decision, elapsed_ms = await abounded(fresh.request(bash(), deadline_ms=deadline_ms))
            assert_policy_in_time(decision, elapsed_ms, deadline_ms)


@pytest.mark.parametrize("mode", ["stall", "slow"])
@pytest.mark.timing
def test_sync_publish_raises_within_its_timeout_when_redis_does_not_answer(
    mode: str, proxy: FaultProxy, real_redis: redis.Redis, namespace: str
) -> None:
    with HookBus(settings_for(proxy.url, namespace), publish_timeout_s=0.3) as bus:
        bounded(lambda: bus.publish(Event(kind="SessionEnd")))  # a warm connection
        proxy.set_mode(mode, delay_s=2.0)
        for _ in range(2):
            started = time.monotonic()
            with pytest.raises(RedisUnavailable, match=r"no answer to XADD within 0.3 s"):
                bounded(lambda: bus.publish(Event(kind="SessionEnd")))
            assert (time.monotonic() - started) * 1000 <= 300 + SLACK_MS
    with HookBus(settings_for(proxy.url, namespace)) as fresh:
        started = time.monotonic()
        with pytest.raises(RedisUnavailable):
            bounded(lambda: fresh.publish(Event(kind="SessionEnd")))
        assert (time.monotonic() - started) * 1000 <= 1_000 + SLACK_MS  # the 1 s default


@pytest.mark.parametrize("mode", ["stall", "slow"])
@pytest.mark.timing
async def test_async_publish_raises_within_its_timeout_when_redis_does_not_answer(
    mode: str, proxy: FaultProxy, real_redis: redis.Redis, namespace: str
) -> None:
    async with AsyncHookBus(settings_for(proxy.url, namespace), publish_timeout_s=0.3) as bus:
        await abounded(bus.publish(Event(kind="SessionEnd")))
        proxy.set_mode(mode, delay_s=2.0)
        for _ in range(2):
            started = time.monotonic()
            with pytest.raises(RedisUnavailable, match=r"no answer to XADD within 0.3 s"):
                await abounded(bus.publish(Event(kind="SessionEnd")))
            assert (time.monotonic() - started) * 1000 <= 300 + SLACK_MS
    async with AsyncHookBus(settings_for(proxy.url, namespace)) as fresh:
        started = time.monotonic()
        with pytest.raises(RedisUnavailable):
            await abounded(fresh.publish(Event(kind="SessionEnd")))
        assert (time.monotonic() - started) * 1000 <= 1_000 + SLACK_MS


# --- row 2: one call, one reply -----------------------------------------------------------


class LateForTheFirstCall:
    """A worker script: the first "resent" call is answered after its deadline, the next
    one at once, differently."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, event: Event) -> list[Reply]:
        self.calls += 1
        if self.calls == 1:
            late = Decision(outcome="allow", reason="late answer", request_id=event.request_id)
            return [Reply(late, delay_s=0.4)]
        second = Decision(outcome="deny", reason="the second call", request_id=event.request_id)
        return [Reply(second)]


@pytest.fixture
def late_worker(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> Iterator[ContractWorker]:
    worker = ContractWorker(real_redis_url, namespace, LateForTheFirstCall())
    yield worker
    worker.stop()


def test_the_sync_client_never_hands_a_resent_event_the_earlier_call_s_late_reply(
    real_redis_url: str, late_worker: ContractWorker, namespace: str
) -> None:
    event = bash("resent")
    with HookBus(settings_for(real_redis_url, namespace)) as bus:
        first = bus.request(event, deadline_ms=150)
        assert first.degraded is True
        second = bus.request(event, deadline_ms=2_000)
    assert second.reason == "the second call"
    assert second.outcome == "deny"
    ids = [e.request_id for e in late_worker.seen]
    assert len(ids) == 2 and ids[0] != ids[1]
    assert second.request_id == ids[1]


async def test_the_async_client_never_hands_a_resent_event_the_earlier_call_s_late_reply(
    real_redis_url: str, late_worker: ContractWorker, namespace: str
) -> None:
    event = bash("resent")
    async with AsyncHookBus(settings_for(real_redis_url, namespace)) as bus:
        first = await bus.request(event, deadline_ms=150)
        assert first.degraded is True
        second = await bus.request(event, deadline_ms=2_000)
    assert second.reason == "the second call"
    assert second.request_id == late_worker.seen[1].request_id


def _filed_under_the_event_id(event: Event) -> list[Reply]:
    """Answers filed in the inbox under the event's id, as chain workers do today."""
    decision = Decision(outcome="allow", reason=event.request_id, request_id=event.request_id)
    return [Reply(decision, delay_s=0.05, inbox_id=event.id)]


async def test_two_async_calls_in_flight_for_the_same_event_each_get_their_own_answer(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    worker = ContractWorker(real_redis_url, namespace, _filed_under_the_event_id)
    try:
        event = bash()
        async with AsyncHookBus(settings_for(real_redis_url, namespace)) as bus:
            first, second = await asyncio.gather(
                bus.request(event, deadline_ms=2_000), bus.request(event, deadline_ms=2_000)
            )
            assert bus.dropped_replies == 0
    finally:
        worker.stop()
    assert not first.degraded and not second.degraded, (first.reason, second.reason)
    assert first.request_id != second.request_id
    assert {first.reason, second.reason} == {e.request_id for e in worker.seen}


def _forged_first(event: Event) -> list[Reply]:
    forged = Decision(outcome="allow", reason="forged", request_id="not-this-call")
    real = Decision(outcome="deny", reason="the real answer", request_id=event.request_id)
    return [Reply(forged), Reply(real, delay_s=0.05)]


@pytest.fixture
def forging_worker(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> Iterator[ContractWorker]:
    worker = ContractWorker(real_redis_url, namespace, _forged_first)
    yield worker
    worker.stop()


def test_the_sync_client_drops_a_reply_that_answers_another_request(
    real_redis_url: str, forging_worker: ContractWorker, namespace: str
) -> None:
    with HookBus(settings_for(real_redis_url, namespace)) as bus:
        decision = bus.request(bash(), deadline_ms=2_000)
        assert decision.reason == "the real answer"
        assert bus.dropped_replies == 1


async def test_the_async_client_drops_a_reply_that_answers_another_request(
    real_redis_url: str, forging_worker: ContractWorker, namespace: str
) -> None:
    async with AsyncHookBus(settings_for(real_redis_url, namespace)) as bus:
        decision = await bus.request(bash(), deadline_ms=2_000)
        assert decision.reason == "the real answer"
        assert bus.dropped_replies == 1


# --- row 3: the deadline travels as a budget ----------------------------------------------

SKEWED_PRODUCER = r"""
import json, sys, time
SKEW_S = float(sys.argv[3]) if len(sys.argv) > 3 else 30.0
real_time, real_time_ns = time.time, time.time_ns
time.time = lambda: real_time() + SKEW_S
time.time_ns = lambda: real_time_ns() + int(SKEW_S * 1e9)
from hookbus import HookBus, Event
from hookbus.bus.settings.loader import Settings
bus = HookBus(Settings(redis_url=sys.argv[1], namespace=sys.argv[2]))
decision = bus.request(Event(kind="PreToolUse", payload={"tool_name": "Bash"}), deadline_ms=400)
print(json.dumps({"degraded": decision.degraded, "reason": decision.reason}))
"""


def test_a_producer_with_a_skewed_clock_sends_its_budget_and_a_fresh_request_id(
    real_redis_url: str, worker: ContractWorker, real_redis: redis.Redis, namespace: str
) -> None:
    out = subprocess.run(
        [sys.executable, "-c", SKEWED_PRODUCER, real_redis_url, namespace],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=True,
    )
    answer = json.loads(out.stdout.strip().splitlines()[-1])
    assert answer == {"degraded": False, "reason": None}
    ((entry_id, _),) = real_redis.xrange(Keys.for_namespace(namespace).requests)
    (sent,) = worker.seen
    assert sent.budget_ms == 400
    assert sent.request_id is not None and len(sent.request_id) == 32
    # the reply goes to the inbox of the request's connection (one XADD per reply)
    inbox_prefix = Keys.for_namespace(namespace).inbox("")
    assert sent.reply_to is not None and sent.reply_to.startswith(inbox_prefix)
    # the old absolute deadline is still sent (on the producer's skewed clock) for workers
    # that predate budget_ms; Redis's own clock stamped the entry id
    redis_ms = int(entry_id.split(b"-")[0])
    assert sent.deadline is not None and sent.deadline - redis_ms > 29_000


@pytest.mark.parametrize("skew_s", [30.0, -30.0])
def test_a_producer_30_s_off_is_served_by_a_real_chain_worker_like_any_other(
    skew_s: float, real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    worker = WorkerProc(real_redis_url, namespace)
    try:
        worker.wait_ready(real_redis)
        out = subprocess.run(
            [sys.executable, "-c", SKEWED_PRODUCER, real_redis_url, namespace, str(skew_s)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
            check=True,
        )
    finally:
        worker.kill()
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"degraded": False, "reason": None}


# --- row 11: misuse is a clear error, and nothing is sent ---------------------------------

BAD_PAYLOADS: list[tuple[Any, str]] = [
    (["a", "list"], "must be a JSON object"),
    ({"n": 2**70}, "outside msgpack's range"),
    ({"o": object()}, "use JSON types"),
    ({1: "int key"}, "is not a string"),
]


def _deep(levels: int) -> dict[str, Any]:
    top: dict[str, Any] = {}
    node = top
    for _ in range(levels):
        node["a"] = node = {}
    return top


BAD_PAYLOADS.append((_deep(10_000), "nested deeper than 64 levels"))


@pytest.mark.parametrize(("payload", "problem"), BAD_PAYLOADS)
def test_the_sync_client_refuses_a_payload_that_cannot_travel_and_sends_nothing(
    payload: Any,
    problem: str,
    real_redis_url: str,
    worker: ContractWorker,
    real_redis: redis.Redis,
    namespace: str,
) -> None:
    keys = Keys.for_namespace(namespace)
    with HookBus(settings_for(real_redis_url, namespace)) as bus:
        with pytest.raises(InvalidPayload, match=problem):
            bus.request(Event(kind="PreToolUse", payload=payload))
        with pytest.raises(InvalidPayload, match=problem):
            bus.publish(Event(kind="SessionEnd", payload=payload))
    assert real_redis.xlen(keys.requests) == 0
    assert real_redis.xlen(keys.events) == 0


@pytest.mark.parametrize(("payload", "problem"), BAD_PAYLOADS)
async def test_the_async_client_refuses_a_payload_that_cannot_travel_and_sends_nothing(
    payload: Any,
    problem: str,
    real_redis_url: str,
    worker: ContractWorker,
    real_redis: redis.Redis,
    namespace: str,
) -> None:
    keys = Keys.for_namespace(namespace)
    async with AsyncHookBus(settings_for(real_redis_url, namespace)) as bus:
        with pytest.raises(InvalidPayload, match=problem):
            await bus.request(Event(kind="PreToolUse", payload=payload))
        with pytest.raises(InvalidPayload, match=problem):
            await bus.publish(Event(kind="SessionEnd", payload=payload))
    assert real_redis.xlen(keys.requests) == 0
    assert real_redis.xlen(keys.events) == 0


@pytest.mark.parametrize("namespace_text", ["two words", "a{b}", "a:b", ""])
def test_an_invalid_namespace_is_a_config_error_naming_it(
    namespace_text: str, real_redis_url: str
) -> None:
    with pytest.raises(ConfigError, match="namespace"):
        HookBus.from_url(real_redis_url, namespace_text)
    with pytest.raises(ConfigError, match="namespace"):
        AsyncHookBus.from_url(real_redis_url, namespace_text)
