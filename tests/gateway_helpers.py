"""A chain worker with scripted answers, a gateway served by uvicorn on a thread of the test
process (its limits patched short), and raw HTTP: what the gateway hardening tests share."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette

from hookbus.harnesses.gateway_http import GuardedH11Protocol

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "claude_code"
PATH = "/v1/hooks/claude-code"

WORKER_CODE = r"""
import json, sys, threading, time
from hookbus.bus.wire import HookResult
from hookbus.bus.settings.loader import load_settings
from hookbus.hooks.registry import HookRegistry
from hookbus.workers.chain.worker import run_chain_worker
from hookbus.workers.fleet.signals import graceful_signals

url, ns = sys.argv[1], sys.argv[2]
settings = load_settings(overrides={"redis_url": url, "namespace": ns}).settings
registry = HookRegistry.from_settings(settings)

def scripted(event):
    text = json.dumps(event.payload)
    if "HOOKBUS_DENY" in text:
        return HookResult(outcome="deny", reason=f"denied for agent {event.agent_id}")
    return HookResult(context=[f"agent={event.agent_id}"])

registry.register("scripted", scripted, events=["PreToolUse", "PromptSubmit", "Stop"])
stop = threading.Event()
with graceful_signals(stop):
    run_chain_worker(settings, registry=registry, stop_event=stop, concurrency=8)
"""


def fixture(name: str, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    data.update(changes)
    return data


def start_worker(url: str, ns: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-c", WORKER_CODE, url, ns],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: SIGSTOP reaches forked children
    )


def stop_worker(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGCONT)
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def serving(app: Starlette) -> Iterator[int]:
    """``app`` behind uvicorn with the gateway's protocol, on a thread; its port."""
    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, http=GuardedH11Protocol, log_level="error",
        lifespan="on", backlog=4096,
    )  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)


def post(port: int, data: dict[str, Any] | bytes, *, headers: str = "", query: str = "") -> Any:
    """One POST on a fresh connection: (status, parsed JSON body)."""
    body = data if isinstance(data, bytes) else json.dumps(data).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            f"POST {PATH}{query} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{headers}Connection: close\r\n\r\n".encode()
            + body
        )
        return parse_response(read_all(sock))


def read_all(sock: socket.socket) -> bytes:
    chunks = []
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def parse_response(raw: bytes) -> tuple[int, Any]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head else 0
    return status, json.loads(body) if body.strip() else None


def peak_rss_kib() -> int:
    """This process's peak resident set (VmHWM), KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc/self/status")


#: A gateway process that records, for each hook answer, the time from the request's arrival
#: (its headers complete) to its last byte handed to the socket, and writes them (ms, one per
#: line) to argv[4] when it is stopped.
TIMED_GATEWAY_CODE = r"""
import signal, sys, threading, time
import uvicorn
from hookbus.bus.settings.loader import Settings
from hookbus.harnesses.gateway import create_app
from hookbus.harnesses.gateway_http import ARRIVAL_STATE, GuardedH11Protocol, RateLimiter

url, ns, port, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
app = create_app(Settings(redis_url=url, namespace=ns), limiter=RateLimiter(1e6, 10**6))
spent = []

async def timed(scope, receive, send):
    if scope["type"] != "http":
        return await app(scope, receive, send)
    async def sending(message):
        await send(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            arrival = scope.get("state", {}).get(ARRIVAL_STATE)
            if arrival is not None:
                spent.append((time.monotonic() - arrival) * 1000)
    await app(scope, receive, sending)

config = uvicorn.Config(timed, host="127.0.0.1", port=port, http=GuardedH11Protocol,
                        log_level="error", lifespan="on", backlog=4096,
                        timeout_graceful_shutdown=3)
server = uvicorn.Server(config)
try:
    server.run()  # re-raises the SIGINT it caught once it has shut down
finally:
    with open(out, "w") as fh:
        fh.write("\n".join(f"{ms:.3f}" for ms in spent))
"""
