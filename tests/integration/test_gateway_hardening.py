"""The gateway at its edge, on a real Redis with a real chain worker: limits hold while a
body is read (a 100 MB body costs no memory), slow headers and bodies are cut off, the
``timeout`` parameter is parsed totally, ``stop_hook_active`` counts only on Stop, input it
cannot read gets the fail-closed JSON, the agent's identity comes from its token, every
answer is JSON, and /healthz says what is down."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from starlette.testclient import TestClient

from hookbus.bus import keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event, decode
from hookbus.harnesses import gateway_http
from hookbus.harnesses.gateway import create_app
from hookbus.harnesses.gateway_http import GuardedH11Protocol, RateLimiter, TokenTable
from tests.gateway_helpers import (
    PATH,
    ROOT,
    fixture,
    free_port,
    parse_response,
    post,
    read_all,
    serving,
    start_worker,
    stop_worker,
)

ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef"


@pytest.fixture
def worker(real_redis_url: str, real_redis: redis.Redis, namespace: str) -> Iterator[None]:
    proc = start_worker(real_redis_url, namespace)
    try:
        deadline = time.monotonic() + 20
        while real_redis.hlen(keys.workers(namespace)) == 0:
            assert proc.poll() is None and time.monotonic() < deadline, "no worker heartbeat"
            time.sleep(0.05)
        yield
    finally:
        stop_worker(proc)


@pytest.fixture
def settings(real_redis_url: str, namespace: str) -> Settings:
    return Settings(redis_url=real_redis_url, namespace=namespace)


def deny_reason(out: dict[str, object]) -> str:
    specific = out.get("hookSpecificOutput")
    assert isinstance(specific, dict), out
    assert specific.get("permissionDecision") == "deny", out
    return str(specific.get("permissionDecisionReason"))


@pytest.fixture
def gateway_process(real_redis_url: str, namespace: str, worker: None) -> Iterator[tuple[int, int]]:
    """``hookbus gateway`` as its own process: (port, pid)."""
    port = free_port()
    env = dict(os.environ, HOOKBUS_REDIS_URL=real_redis_url, HOOKBUS_NAMESPACE=namespace)
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.Popen(
        [sys.executable, "-m", "hookbus", "gateway", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "no gateway"
                time.sleep(0.05)
        yield port, proc.pid
    finally:
        proc.terminate()
        proc.wait(10)


def _vm_hwm_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_a_100_mb_body_is_refused_while_read_and_costs_no_memory(
    gateway_process: tuple[int, int],
) -> None:
    port, pid = gateway_process
    assert post(port, fixture("PreToolUse"))[0] == 200  # warm: every import done
    before = _vm_hwm_kib(pid)
    size = 100 * 1024 * 1024
    head = b'{"hook_event_name": "PreToolUse", "tool_name": "Bash", "pad": "'
    chunk = b"a" * 65536
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            f"POST {PATH} HTTP/1.1\r\nHost: x\r\nContent-Length: {size}\r\n\r\n".encode() + head
        )
        sent = len(head)
        try:
            while sent < size:
                sock.sendall(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the gateway answered and closed: what it did not read is never sent
        status, out = parse_response(read_all(sock))
    grown_mib = (_vm_hwm_kib(pid) - before) / 1024
    assert status == 200
    assert "over the gateway's limit" in deny_reason(out)
    assert grown_mib < 20, f"peak memory grew {grown_mib:.0f} MiB for a 100 MB body"
    assert sent < size  # it stopped reading long before the end


def test_headers_sent_a_byte_at_a_time_are_cut_off(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(GuardedH11Protocol, "header_timeout_s", 1.0)
    with serving(create_app(settings)) as port:
        start = time.monotonic()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(f"POST {PATH} HTTP/1.1\r\n".encode())
            closed = False
            for _ in range(40):
                try:
                    sock.sendall(b"X")
                    time.sleep(0.1)
                    sock.setblocking(False)
                    try:
                        closed = sock.recv(1) == b""
                    except BlockingIOError:
                        pass
                    finally:
                        sock.setblocking(True)
                except (BrokenPipeError, ConnectionResetError):
                    closed = True
                if closed:
                    break
        elapsed = time.monotonic() - start
    assert closed, "a connection trickling header bytes was never closed"
    assert 0.9 < elapsed < 2.5


def test_a_body_too_slow_gets_the_fail_closed_answer(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gateway_http, "BODY_TIMEOUT_S", 1.0)
    body = json.dumps(fixture("PreToolUse")).encode()
    with serving(create_app(settings)) as port:
        start = time.monotonic()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(
                f"POST {PATH} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n".encode()
                + body[:10]
            )
            status, out = parse_response(read_all(sock))
        elapsed = time.monotonic() - start
    assert status == 200
    assert out == {"decision": "block", "reason": out["reason"]}
    assert "too slowly" in out["reason"]
    assert elapsed < 2.5


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "-1", "0", "abc", "1e999"])
def test_a_timeout_that_is_no_finite_positive_number_is_a_json_400(
    settings: Settings, value: str
) -> None:
    with TestClient(create_app(settings)) as client:
        response = client.post(f"{PATH}?timeout={value}", json=fixture("PreToolUse"))
    assert response.status_code == 400
    assert "timeout must be" in response.json()["error"]


def test_a_huge_timeout_is_clamped_and_answered(settings: Settings, worker: None) -> None:
    data = fixture("PreToolUse", tool_input={"command": "HOOKBUS_DENY"})
    with TestClient(create_app(settings)) as client:
        response = client.post(f"{PATH}?timeout=1e300", json=data)
    assert response.status_code == 200
    assert "denied for agent" in deny_reason(response.json())


def test_stop_hook_active_is_honoured_on_stop_only(settings: Settings, worker: None) -> None:
    guard = fixture("PreToolUse", tool_input={"command": "HOOKBUS_DENY"}, stop_hook_active=True)
    stop = fixture("Stop", last_assistant_message="HOOKBUS_DENY", stop_hook_active=True)
    with TestClient(create_app(settings)) as client:
        assert "denied for agent" in deny_reason(client.post(PATH, json=guard).json())
        assert client.post(PATH, json=stop).json() == {}


def test_deeply_nested_input_gets_the_fail_closed_deny(settings: Settings) -> None:
    body = (
        b'{"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": '
        + b"[" * 100_000
        + b"]" * 100_000
        + b"}"
    )
    with TestClient(create_app(settings)) as client:
        response = client.post(PATH, content=body)
    assert response.status_code == 200
    assert "nested too deeply" in deny_reason(response.json())


def test_the_agent_id_comes_from_the_token_never_from_the_body(
    settings: Settings, worker: None, real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"# agents\nalice {ALICE}\nbob {BOB}\n")
    tokens.chmod(0o600)
    table = TokenTable.from_file(tokens)
    forged = fixture("PreToolUse", agent_id="mallory", tool_input={"command": "HOOKBUS_DENY"})
    with TestClient(create_app(settings, tokens=table)) as client:
        as_alice = client.post(PATH, json=forged, headers={"Authorization": f"Bearer {ALICE}"})
        assert deny_reason(as_alice.json()) == "denied for agent alice"
        after = fixture("PostToolUse", agent_id="mallory")
        client.post(PATH, json=after, headers={"Authorization": f"Bearer {BOB}"})
        assert client.post(PATH, json=forged).status_code == 401
    entries: list[tuple[bytes, dict[bytes, bytes]]] = real_redis.xrange(  # type: ignore[assignment]
        keys.events(namespace)
    )
    (entry,) = entries
    event = decode(entry[1][b"e"], Event)
    assert event.agent_id == "bob"
    assert "agent_id" not in event.payload


def test_a_tokens_file_others_can_read_is_refused(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {ALICE}\n")
    tokens.chmod(0o644)
    with pytest.raises(Exception, match="chmod 600"):
        TokenTable.from_file(tokens)


def test_past_its_rate_an_agent_gets_the_fail_closed_answer(
    settings: Settings, worker: None
) -> None:
    app = create_app(settings, limiter=RateLimiter(rate_per_s=1.0, burst=2))
    with TestClient(app) as client:
        answers = [client.post(PATH, json=fixture("PreToolUse")).json() for _ in range(3)]
    assert "rate limit" in deny_reason(answers[2])
    assert "rate limit" not in json.dumps(answers[:2])


def test_a_cluster_url_nobody_answers_gives_json_everywhere() -> None:
    settings = Settings(redis_url="redis+cluster://127.0.0.1:1/0", namespace="nowhere")
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        guard = client.post(PATH, json=fixture("PreToolUse"))
        health = client.get("/healthz")
    assert guard.status_code == 200
    assert "hookbus is unavailable" in deny_reason(guard.json())
    assert health.status_code == 503
    assert health.json()["ok"] is False and health.json()["redis"]


def test_healthz_says_no_worker_is_alive_with_503(settings: Settings) -> None:
    with TestClient(create_app(settings)) as client:
        health = client.get("/healthz")
    assert health.status_code == 503
    body = health.json()
    assert (body["ok"], body["redis"]) == (False, "ok")
    where = f"namespace {settings.namespace!r} at {settings.redis_url}"
    assert body["workers"] == f"no chain worker alive (no heartbeat in {where})"
    assert (body["redis_url"], body["namespace"]) == (settings.redis_url, settings.namespace)


def test_the_claude_code_hook_answers_deeply_nested_input_with_the_fail_closed_json() -> None:
    body = (
        b'{"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": '
        + b"[" * 100_000
        + b"]" * 100_000
        + b"}"
    )
    env = dict(os.environ, HOOKBUS_REDIS_URL="redis://127.0.0.1:1/0", PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-m", "hookbus", "claude-code", "hook"],
        input=body,
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "nested too deeply" in deny_reason(json.loads(done.stdout))
