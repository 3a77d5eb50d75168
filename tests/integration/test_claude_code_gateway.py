"""``hookbus gateway``: Claude Code's http hooks answered by the fleet, same JSON as the
command, against a real chain worker on the real Redis."""

from __future__ import annotations

import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from starlette.testclient import TestClient

from hookbus.bus import keys
from hookbus.bus.settings.loader import Settings
from hookbus.harnesses.gateway import create_app
from hookbus.harnesses.gateway_http import TokenTable
from tests.blocking_helpers import wait_for
from tests.claude_code_helpers import fixture, run_hook, start_worker, stop_worker

ROOT = Path(__file__).resolve().parents[2]
PATH = "/v1/hooks/claude-code"


@pytest.fixture
def worker(real_redis_url: str, real_redis: redis.Redis, namespace: str) -> Iterator[None]:
    proc = start_worker(real_redis_url, namespace)
    try:
        wait_for(lambda: real_redis.hlen(keys.workers(namespace)) > 0, what="a heartbeat")
        yield
    finally:
        stop_worker(proc)


@pytest.fixture
def client(real_redis_url: str, namespace: str, worker: None) -> Iterator[TestClient]:
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def test_the_gateway_answers_with_the_same_json_as_the_command(
    client: TestClient, real_redis_url: str, namespace: str
) -> None:
    for name, changes in (
        ("PreToolUse", {"tool_input": {"command": "HOOKBUS_DENY"}}),
        ("PreToolUse", {"tool_input": {"command": "HOOKBUS_CONTEXT"}}),
        ("PermissionRequest", {"tool_input": {"command": "HOOKBUS_DENY"}}),
        ("Stop", {"last_assistant_message": "HOOKBUS_DENY"}),
        ("UserPromptSubmit", {"prompt": "HOOKBUS_HALT"}),
    ):
        data = fixture(name, **changes)
        response = client.post(PATH, json=data)
        assert response.status_code == 200
        _, from_command, _ = run_hook(data, real_redis_url, namespace)
        assert response.json() == from_command, name


def test_an_observe_only_event_reaches_the_event_stream_and_answers_an_empty_object(
    client: TestClient, real_redis: redis.Redis, namespace: str
) -> None:
    response = client.post(PATH, json=fixture("PostToolUse"))
    assert (response.status_code, response.json()) == (200, {})
    (entry,) = real_redis.xrange(keys.events(namespace))
    assert b"PostToolUse" in entry[1][b"e"]


def test_healthz_pings_redis(client: TestClient) -> None:
    adapters = [
        "claude-code",
        "cline",
        "codex",
        "copilot",
        "gemini-cli",
        "kilo",
        "opencode",
        "qwen-code",
    ]
    assert client.get("/healthz").json() == {"ok": True, "adapters": adapters}


def test_input_that_is_no_hook_event_gets_the_fail_closed_json_and_unknown_adapters_404(
    client: TestClient,
) -> None:
    # an http hook's non-2xx answer is a non-blocking error to Claude Code: only a 200
    # with a block keeps a guarded call from going through
    for body in (b"{not json", b"[1, 2]", b'{"no": "event name"}'):
        response = client.post(PATH, content=body)
        assert response.status_code == 200
        assert response.json()["decision"] == "block", body
    assert client.post("/v1/hooks/nobody", json=fixture("Stop")).status_code == 404


def test_a_bearer_token_guards_the_hook_paths(real_redis_url: str, namespace: str) -> None:
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    with TestClient(create_app(settings, tokens=TokenTable.shared("s3cret"))) as test_client:
        data = fixture("PostToolUse")
        assert test_client.post(PATH, json=data).status_code == 401
        wrong = {"Authorization": "Bearer nope"}
        assert test_client.post(PATH, json=data, headers=wrong).status_code == 401
        right = {"Authorization": "Bearer s3cret"}
        assert test_client.post(PATH, json=data, headers=right).status_code == 200


def test_with_redis_unreachable_guards_deny_and_healthz_says_503() -> None:
    settings = Settings(redis_url="redis://127.0.0.1:1/0", namespace="nowhere")
    with TestClient(create_app(settings)) as test_client:
        out = test_client.post(PATH, json=fixture("PreToolUse")).json()
        assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
        reason = out["hookSpecificOutput"]["permissionDecisionReason"]
        assert "hookbus is unavailable" in reason
        # where it looked: the namespace; the Redis address only in the gateway's log
        assert "'nowhere'" in reason and "[address withheld]" in reason
        assert "127.0.0.1" not in reason
        assert test_client.post(PATH, json=fixture("PostToolUse")).json() == {}
        health = test_client.get("/healthz")
        assert health.status_code == 503
        assert health.json()["ok"] is False
        assert health.json()["redis_url"] == "redis://127.0.0.1:1/0"
        assert health.json()["namespace"] == "nowhere"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _post(conn: http.client.HTTPConnection, data: dict[str, Any]) -> tuple[int, Any]:
    body = json.dumps(data).encode()
    conn.request("POST", PATH, body, {"Content-Type": "application/json"})
    response = conn.getresponse()
    return response.status, json.loads(response.read())


def test_the_gateway_command_serves_keep_alive_posts_without_delayed_ack_stalls(
    real_redis_url: str, namespace: str, worker: None
) -> None:
    port = _free_port()
    env = dict(
        os.environ,
        HOOKBUS_REDIS_URL=real_redis_url,
        HOOKBUS_NAMESPACE=namespace,
        PYTHONPATH=str(ROOT),
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "hookbus", "gateway", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def up() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    return True
            except OSError:
                return proc.poll() is not None

        wait_for(up, what="the gateway to listen")
        assert proc.poll() is None
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        assert (
            _post(conn, fixture("PreToolUse", tool_input={"command": "HOOKBUS_DENY"}))[1][
                "hookSpecificOutput"
            ]["permissionDecision"]
            == "deny"
        )
        times = []
        for _ in range(30):
            start = time.perf_counter()
            status, _ = _post(conn, fixture("PreToolUse"))
            times.append((time.perf_counter() - start) * 1000)
            assert status == 200
        conn.close()
        # a delayed-ACK stall costs ~40 ms per keep-alive POST; the round trip is ~1-3 ms
        assert statistics.median(times) < 20
    finally:
        proc.terminate()
        proc.wait(10)
