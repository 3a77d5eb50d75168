"""Gateway under load: many agent clients at once, with and without a stalled chain worker.

Run: ``python benchmarks/gateway_load.py [--redis-url URL] [--clients 600] [--seconds 5]
[--stall-s 0]``

Side by side, in one run, on one Redis and one chain worker process (a trivial hook):

(a) in-process: ``AsyncHookBus.request`` with ``--clients`` requests in flight in one loop,
    each caller sending its next request as soon as it has an answer;
(b) the gateway (``hookbus gateway``, its own process): ``--clients`` keep-alive HTTP
    connections, each posting a PreToolUse as soon as it has the last answer.

Prints p50/p99 latency and throughput of each and the ratio b/a of the p50s. With
``--stall-s S`` the chain worker is SIGSTOPped for S seconds in the middle of (b) and the
run counts answers later than the deadline (250 ms) plus ``--margin-ms``: the deadline runs
from each request's arrival, so none should be. Latencies are measured by the clients,
which share the host: on a small machine their own queueing is part of the figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import redis

from hookbus import AsyncHookBus
from hookbus.bus.keys import namespace_pattern
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event

ROOT = Path(__file__).resolve().parents[1]
PATH = "/v1/hooks/claude-code"
#: The PreToolUse deadline every request runs under (the configured default), ms.
DEADLINE_MS = 250
#: A client that waits this long for an answer counts it as never given, in seconds.
NO_ANSWER_S = 10.0

WORKER_CODE = r"""
import sys, threading
from hookbus.bus.wire import HookResult
from hookbus.bus.settings.loader import load_settings
from hookbus.hooks.registry import HookRegistry
from hookbus.workers.chain.worker import run_chain_worker
from hookbus.workers.fleet.signals import graceful_signals

settings = load_settings(overrides={"redis_url": sys.argv[1], "namespace": sys.argv[2]}).settings
registry = HookRegistry.from_settings(settings)
registry.register("allow", lambda event: HookResult(), events=["PreToolUse"])
stop = threading.Event()
with graceful_signals(stop):
    run_chain_worker(settings, registry=registry, stop_event=stop, concurrency=8)
"""


@dataclass
class Run:
    """Latencies (ms) and answers of one side."""

    latencies: list[float] = field(default_factory=list)
    degraded: int = 0
    late: int = 0
    unanswered: int = 0
    seconds: float = 0.0

    def line(self, name: str) -> str:
        lat = sorted(self.latencies)
        if not lat:
            return f"{name}: no answers"
        p50 = statistics.median(lat)
        p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
        rate = len(lat) / self.seconds if self.seconds else 0.0
        return (
            f"{name}: {len(lat)} answers, p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {lat[-1]:.1f} "
            f"ms, {rate:.0f} req/s, degraded {self.degraded}, late {self.late}, "
            f"unanswered {self.unanswered}"
        )


def request_bytes() -> bytes:
    body = json.dumps(
        {
            "hook_event_name": "PreToolUse",
            "session_id": "load",
            "tool_name": "Bash",
            "tool_input": {"command": "ls"},
        }
    ).encode()
    head = (
        f"POST {PATH} HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _read_response(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return await reader.readexactly(length)


async def http_client(
    port: int, until: float, run: Run, margin_ms: float, think_s: float = 0.0
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    payload = request_bytes()
    try:
        while time.monotonic() < until:
            start = time.perf_counter()
            writer.write(payload)
            try:
                body = await asyncio.wait_for(_read_response(reader), NO_ANSWER_S)
            except TimeoutError:
                run.unanswered += 1
                return
            ms = (time.perf_counter() - start) * 1000
            run.latencies.append(ms)
            if b"unavailable" in body or b"systemMessage" in body:
                run.degraded += 1
            if ms > DEADLINE_MS + margin_ms:
                run.late += 1
            if think_s:
                await asyncio.sleep(think_s)  # an agent between two tool calls
    finally:
        writer.close()


async def gateway_side(
    port: int, clients: int, seconds: float, margin_ms: float, think_s: float = 0.0
) -> Run:
    run = Run()
    until = time.monotonic() + seconds
    start = time.monotonic()
    await asyncio.gather(
        *(http_client(port, until, run, margin_ms, think_s) for _ in range(clients))
    )
    run.seconds = time.monotonic() - start
    return run


async def in_process_side(settings: Settings, clients: int, seconds: float) -> Run:
    run = Run()
    async with AsyncHookBus(settings) as bus:
        await bus.request(Event(kind="PreToolUse", payload={"tool_name": "Bash"}))
        until = time.monotonic() + seconds

        async def caller() -> None:
            while time.monotonic() < until:
                start = time.perf_counter()
                event = Event(kind="PreToolUse", session_id="load", payload={"tool_name": "Bash"})
                decision = await bus.request(event)
                run.latencies.append((time.perf_counter() - start) * 1000)
                run.degraded += decision.degraded

        start = time.monotonic()
        await asyncio.gather(*(caller() for _ in range(clients)))
        run.seconds = time.monotonic() - start
    return run


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_gateway(url: str, ns: str) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    env = dict(os.environ, HOOKBUS_REDIS_URL=url, HOOKBUS_NAMESPACE=ns, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "hookbus", "gateway", "--port", str(port), "--rate", "100000"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, port
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the gateway did not start") from None
            time.sleep(0.05)


def start_worker(url: str, ns: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-c", WORKER_CODE, url, ns],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def wait_for_worker(client: redis.Redis, ns: str) -> None:
    deadline = time.monotonic() + 20
    while not client.hlen(f"hookbus:{{{ns}}}:workers"):
        if time.monotonic() > deadline:
            raise RuntimeError("the chain worker never heartbeat")
        time.sleep(0.05)


async def stall(worker: subprocess.Popen[bytes], after_s: float, stall_s: float) -> None:
    await asyncio.sleep(after_s)
    os.killpg(worker.pid, signal.SIGSTOP)
    await asyncio.sleep(stall_s)
    os.killpg(worker.pid, signal.SIGCONT)


async def stalled_gateway_side(
    port: int, worker: subprocess.Popen[bytes], args: argparse.Namespace
) -> Run:
    seconds = args.stall_s + 3.0
    stopper = asyncio.create_task(stall(worker, 1.0, args.stall_s))
    run = await gateway_side(port, args.clients, seconds, args.margin_ms)
    await stopper
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--clients", type=int, default=600)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--stall-s", type=float, default=0.0)
    parser.add_argument("--margin-ms", type=float, default=50.0)
    args = parser.parse_args()
    ns = f"gwload{uuid.uuid4().hex[:6]}"
    client = redis.Redis.from_url(args.redis_url, protocol=2)
    worker = start_worker(args.redis_url, ns)
    gateway, port = start_gateway(args.redis_url, ns)
    try:
        wait_for_worker(client, ns)
        if args.stall_s:
            run = asyncio.run(stalled_gateway_side(port, worker, args))
            print(run.line(f"gateway, {args.clients} clients, worker stopped {args.stall_s:g} s"))
            return
        settings = Settings(redis_url=args.redis_url, namespace=ns)
        inproc = asyncio.run(in_process_side(settings, args.clients, args.seconds))
        via = asyncio.run(gateway_side(port, args.clients, args.seconds, args.margin_ms))
        print(inproc.line(f"in-process, {args.clients} in flight"))
        print(via.line(f"gateway, {args.clients} clients"))
        ratio = statistics.median(via.latencies) / statistics.median(inproc.latencies)
        print(f"gateway / in-process p50: {ratio:.2f}x")
    finally:
        gateway.terminate()
        gateway.wait(10)
        os.killpg(worker.pid, signal.SIGCONT)
        worker.terminate()
        worker.wait(10)
        for key in client.scan_iter(match=namespace_pattern(ns)):
            client.delete(key)
        client.close()


if __name__ == "__main__":
    main()
