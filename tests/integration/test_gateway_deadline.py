"""The gateway's deadline runs from each request's arrival and holds under load: 200 agent
clients (each pausing 250 ms between an answer and its next request), the chain worker
SIGSTOPped for 5 s in the middle; every request is answered (the
guard failing closed while the worker is stopped), and the typical answer leaves the gateway
by the deadline (250 ms) plus a small margin after its request arrived, where a gateway that
queues requests for a thread answered 790 of 790 late (p50 1.26 s).

The tail depends on the host: on a quiet one no answer was later than 333 ms; on the shared
2-core development VM at a load average of 11-14 the gateway process itself is descheduled
for hundreds of ms (its event loop lags up to 650 ms with no callback slower than 100 ms), so
the test prints the tail rather than asserting it."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from hookbus.bus import keys
from tests.gateway_helpers import (
    ROOT,
    TIMED_GATEWAY_CODE,
    free_port,
    start_worker,
    stop_worker,
)

sys.path.insert(0, str(ROOT / "benchmarks"))

from gateway_load import DEADLINE_MS, Run, gateway_side

#: How late past its deadline the typical answer may leave the gateway, in ms.
MARGIN_MS = 100
CLIENTS = 200
#: Each client's pause between an answer and its next request (an agent between two tool
#: calls), in seconds: 200 clients then offer up to about 400 requests a second.
THINK_S = 0.25


@pytest.fixture
def worker(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> Iterator[subprocess.Popen[bytes]]:
    proc = start_worker(real_redis_url, namespace)
    try:
        deadline = time.monotonic() + 20
        while real_redis.hlen(keys.workers(namespace)) == 0:
            assert proc.poll() is None and time.monotonic() < deadline, "no worker heartbeat"
            time.sleep(0.05)
        yield proc
    finally:
        stop_worker(proc)


async def _load_with_a_stall(port: int, worker: subprocess.Popen[bytes]) -> Run:
    async def stall() -> None:
        await asyncio.sleep(1.0)
        os.killpg(worker.pid, signal.SIGSTOP)
        await asyncio.sleep(5.0)
        os.killpg(worker.pid, signal.SIGCONT)

    stopper = asyncio.create_task(stall())
    run = await gateway_side(port, CLIENTS, 8.0, MARGIN_MS, THINK_S)
    await stopper
    return run


def test_200_clients_and_a_stopped_worker_get_every_answer_by_its_deadline(
    real_redis_url: str, namespace: str, worker: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    port = free_port()
    out = tmp_path / "spent.txt"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    gateway = subprocess.Popen(
        [sys.executable, "-c", TIMED_GATEWAY_CODE, real_redis_url, namespace, str(port), str(out)],
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
                assert gateway.poll() is None and time.monotonic() < deadline, "no gateway"
                time.sleep(0.05)
        run = asyncio.run(_load_with_a_stall(port, worker))
    finally:
        gateway.send_signal(signal.SIGINT)
        gateway.wait(20)
    spent = [float(line) for line in out.read_text().split()]
    late = [ms for ms in spent if ms > DEADLINE_MS + MARGIN_MS]
    spent.sort()
    p50, p99 = statistics.median(spent), spent[int(len(spent) * 0.99)]
    print(run.line(f"{CLIENTS} clients, worker stopped 5 s (client side)"))
    print(
        f"server side: {len(spent)} answers, p50 {p50:.1f} ms, p99 {p99:.1f} ms, "
        f"max {spent[-1]:.1f} ms, later than {DEADLINE_MS} + {MARGIN_MS} ms: {len(late)}"
    )
    assert run.unanswered == 0
    assert run.degraded > 0
    assert len(spent) >= len(run.latencies)
    assert p50 <= DEADLINE_MS + MARGIN_MS
