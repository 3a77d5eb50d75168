"""The asyncio client checks the fleet's liveness once when its cached answer goes stale,
however many requests are in flight then: the requests that find it stale while a check is
on its way wait for that check (each used to send its own HGETALL / TIME / GET / probe, a
burst of them on the namespace's master every second at a few thousand requests/s)."""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from blocking import event, start_workers, stop_workers  # noqa: E402

from hookbus import AsyncHookBus  # noqa: E402
from hookbus.bus.policy.liveness import LIVENESS_CACHE_ALIVE_S  # noqa: E402
from hookbus.bus.settings.loader import Settings  # noqa: E402
from tests.cluster_fixture import commandstats, local_server  # noqa: E402

IN_FLIGHT = 100


async def _burst_after_the_cache_expired(settings: Settings, admin: object) -> tuple[int, int]:
    async with AsyncHookBus(settings) as bus:
        await bus.request(event(), deadline_ms=2_000)  # connected, cache filled
        await asyncio.sleep(LIVENESS_CACHE_ALIVE_S + 0.2)  # and now stale
        before = commandstats(admin).get("hgetall", 0)  # type: ignore[arg-type]
        decisions = await asyncio.gather(
            *(bus.request(event(), deadline_ms=5_000) for _ in range(IN_FLIGHT))
        )
        checks = commandstats(admin).get("hgetall", 0) - before  # type: ignore[arg-type]
    return checks, sum(d.degraded for d in decisions)


def test_requests_in_flight_share_one_liveness_check() -> None:
    with local_server() as server:
        admin = server.client()
        ns = f"live{uuid.uuid4().hex[:6]}"
        procs = start_workers(server.url, ns, 1, admin)
        try:
            time.sleep(0.5)
            settings = Settings(redis_url=server.url, namespace=ns)
            checks, degraded = asyncio.run(_burst_after_the_cache_expired(settings, admin))
        finally:
            stop_workers(procs)
        admin.close()
    assert degraded == 0
    # the producer's one check, and the worker's own reads of the workers hash (reader
    # slots rebalance about once a second)
    assert 1 <= checks <= 4, checks
