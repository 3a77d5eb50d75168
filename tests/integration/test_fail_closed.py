"""No failure turns a guarded kind into an allow: with an operator's guard on PromptSubmit
(a kind whose configured policy is allow), a stalled Redis, a Redis answering BUSY, a refused
request stream, no chain worker alive and an oversized prompt are each answered deny,
flagged degraded, by every kind of producer: the SDK, the asyncio SDK, ``hookbus publish
--wait``, the per-event Claude Code hook (fresh processes that read the published policy
from their cache) and the gateway. Real redis-server with the shipped ACL, real chain worker."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from starlette.testclient import TestClient

from hookbus import AsyncHookBus, HookBus
from hookbus.harnesses.gateway import create_app
from tests.fail_closed_helpers import (
    KEYS,
    Fleet,
    async_ask,
    cli_ask,
    fleet,
    hook_ask,
    push,
    sdk_ask,
    unguarded_hooks,
)

SECRET = "my SECRET is hunter2"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """The fleet, after one request of a fresh process while all was well: it left the
    policy in the per-user cache that later fresh processes read when Redis cannot answer."""
    with fleet(tmp_path_factory.mktemp("fail-closed")) as f:
        assert cli_ask(f, "hello")["degraded"] is False
        yield f


@pytest.fixture(scope="module")
def clients(guarded: Fleet) -> Iterator[tuple[HookBus, AsyncHookBus, asyncio.AbstractEventLoop]]:
    """Long-lived SDK clients that asked once while all was well (they know the policy)."""
    loop = asyncio.new_event_loop()
    bus = HookBus(guarded.settings())
    abus = AsyncHookBus(guarded.settings())
    try:
        yield bus, abus, loop
    finally:
        bus.close()
        loop.run_until_complete(abus.aclose())
        loop.close()


@pytest.fixture(scope="module")
def gateway(guarded: Fleet) -> Iterator[TestClient]:
    """``hookbus gateway``'s app on the producer user, warm (it read the policy)."""
    with TestClient(create_app(guarded.settings())) as client:
        assert gateway_ask(client, "hello") == {}
        yield client


def gateway_ask(client: TestClient, prompt: str) -> dict[str, object]:
    data = {"hook_event_name": "UserPromptSubmit", "session_id": "s1", "prompt": prompt}
    response = client.post("/v1/hooks/claude-code?timeout=2", json=data)
    assert response.status_code == 200
    out: dict[str, object] = response.json()
    return out


def test_with_the_fleet_up_the_guard_answers_every_producer(
    guarded: Fleet,
    clients: tuple[HookBus, AsyncHookBus, asyncio.AbstractEventLoop],
    gateway: TestClient,
) -> None:
    out = gateway_ask(gateway, SECRET)
    assert out.get("decision") == "block" and "secret in the prompt" in str(out.get("reason"))
    bus, abus, loop = clients
    for decision in (sdk_ask(bus, SECRET, 3_000), async_ask(abus, loop, SECRET)):
        assert (decision.outcome, decision.degraded) == ("deny", False), decision.reason
    assert sdk_ask(bus, "hello", 3_000).outcome == "allow"
    data = cli_ask(guarded, SECRET)
    assert (data["outcome"], data["degraded"]) == ("deny", False), data
    code, out = hook_ask(guarded, SECRET)
    assert code == 0 and out.get("decision") == "block", out
    assert "secret in the prompt" in str(out.get("reason"))


@contextlib.contextmanager
def redis_stalled(f: Fleet) -> Iterator[None]:
    os.kill(f.server.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(f.server.proc.pid, signal.SIGCONT)
        _wait_answering(f)


@contextlib.contextmanager
def redis_busy(f: Fleet) -> Iterator[None]:
    """An operator's script loops for 8 s: past 100 ms every other client gets BUSY."""
    script = (
        "local t0 = redis.call('TIME') "
        "while true do local t = redis.call('TIME') "
        "if (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) > 8000000 then break end end return 1"
    )
    runner = f.server.client("hookbus-operator")
    # longer than the script: a read timeout would make redis-py send the EVAL again
    runner.connection_pool.connection_kwargs["socket_timeout"] = 30
    outcome: list[object] = []

    def run() -> None:
        started = time.monotonic()
        try:
            outcome.append(runner.eval(script, 0))
        except redis.exceptions.RedisError as exc:  # reported below, with when it came
            outcome.append(f"{exc} after {time.monotonic() - started:.2f} s")

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    probe = f.server.client("hookbus-operator")
    deadline = time.monotonic() + 5
    while True:
        try:
            probe.ping()
        except redis.exceptions.BusyLoadingError:
            break
        except redis.exceptions.ResponseError as exc:
            if "BUSY" in str(exc):
                break
            raise
        assert time.monotonic() < deadline, "Redis never answered BUSY"
        time.sleep(0.02)
    try:
        yield
    finally:
        thread.join(15)
        runner.close()
        probe.close()
        _wait_answering(f)
    assert outcome == [1], outcome


@contextlib.contextmanager
def request_stream_refused(f: Fleet) -> Iterator[None]:
    """The request stream's key holds a string: every XADD is refused (WRONGTYPE)."""
    with f.server.client("hookbus-operator") as operator:
        operator.delete(KEYS.requests)
        operator.set(KEYS.requests, "not a stream")
        try:
            yield
        finally:
            operator.delete(KEYS.requests)
            _wait_answering(f)


@contextlib.contextmanager
def no_worker_alive(f: Fleet) -> Iterator[None]:
    os.killpg(f.chain.pid, signal.SIGSTOP)
    with f.server.client("hookbus-operator") as operator:
        operator.delete(KEYS.workers)  # its heartbeat gone: nobody is alive
        try:
            yield
        finally:
            os.killpg(f.chain.pid, signal.SIGCONT)
            _wait_answering(f)


@contextlib.contextmanager
def nothing_wrong(f: Fleet) -> Iterator[None]:
    yield


def _wait_answering(f: Fleet) -> None:
    with HookBus(f.settings()) as bus:
        deadline = time.monotonic() + 20
        while sdk_ask(bus, "hello", 1_000).degraded:
            assert time.monotonic() < deadline, "the fleet never answered again"
            time.sleep(0.2)


#: A prompt over streams.max_event_bytes (1 MiB).
OVERSIZED = SECRET + " " + "x" * (1024 * 1024 + 10)

FAULTS: dict[str, tuple[Callable[[Fleet], contextlib.AbstractContextManager[None]], str]] = {
    "redis stalled": (redis_stalled, SECRET),
    "redis busy": (redis_busy, SECRET),
    "request stream refused": (request_stream_refused, SECRET),
    "no worker alive": (no_worker_alive, SECRET),
    "oversized prompt": (nothing_wrong, OVERSIZED),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_guarded_kind_is_denied_degraded_by_every_producer_whatever_the_failure(
    guarded: Fleet,
    clients: tuple[HookBus, AsyncHookBus, asyncio.AbstractEventLoop],
    gateway: TestClient,
    fault: str,
) -> None:
    bus, abus, loop = clients
    make_fault, prompt = FAULTS[fault]
    with make_fault(guarded):
        out = gateway_ask(gateway, prompt)
        assert out.get("decision") == "block", out
        assert "fails closed" in str(out.get("reason")), out
        if fault == "request stream refused":  # the XADD's answer, said at once
            assert "WRONGTYPE" in str(out.get("reason")), out
        decision = sdk_ask(bus, prompt)
        assert (decision.outcome, decision.degraded) == ("deny", True), decision.reason
        decision = async_ask(abus, loop, prompt)
        assert (decision.outcome, decision.degraded) == ("deny", True), decision.reason
        if fault != "redis stalled":  # a fresh process cannot even connect: see the hook
            data = cli_ask(guarded, prompt)
            assert (data["outcome"], data["degraded"]) == ("deny", True), data
        code, out = hook_ask(guarded, prompt)
        assert code == 0, out
        assert out.get("decision") == "block", out
        assert "fails closed" in str(out.get("reason")), out


def test_without_a_guard_the_same_failure_follows_the_kinds_configured_policy(
    guarded: Fleet, tmp_path: Path
) -> None:
    push(guarded.server, unguarded_hooks(tmp_path / "hooks"))
    with HookBus(guarded.settings()) as bus:
        deadline = time.monotonic() + 10
        while "note" not in " ".join(sdk_ask(bus, "hello", 2_000).context):
            assert time.monotonic() < deadline, "the unguarded bundle never ran"
            time.sleep(0.1)
        time.sleep(5.5)  # the policy read with the liveness check is renewed every 5 s
        sdk_ask(bus, "hello", 2_000)
        with redis_stalled(guarded):
            decision = sdk_ask(bus, SECRET)
    assert (decision.outcome, decision.degraded) == ("allow", True), decision.reason
