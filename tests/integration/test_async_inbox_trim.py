"""The asyncio client's reply inbox is trimmed once per hundred replies read, as the sync
client's is, not once per read: at a low rate every read holds one reply, and an XTRIM per
read was a command per request (an approximate ``MINID`` trim frees only whole stream nodes
of about a hundred entries, so trimming more often frees nothing sooner)."""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from blocking import event, start_workers, stop_workers  # noqa: E402

from hookbus import AsyncHookBus  # noqa: E402
from hookbus.bus.keys import Keys  # noqa: E402
from hookbus.bus.settings.loader import Settings  # noqa: E402
from hookbus.producers.async_inbox import INBOX_TRIM_EVERY  # noqa: E402
from tests.cluster_fixture import commandstats, local_server  # noqa: E402

REQUESTS = 250


async def _one_at_a_time(settings: Settings) -> list[bool]:
    async with AsyncHookBus(settings) as bus:
        return [(await bus.request(event(), deadline_ms=2_000)).degraded for _ in range(REQUESTS)]


def test_one_reply_per_read_is_not_one_xtrim_per_read() -> None:
    with local_server() as server:
        admin = server.client()
        ns = f"trim{uuid.uuid4().hex[:6]}"
        procs = start_workers(server.url, ns, 1, admin)
        try:
            before = commandstats(admin).get("xtrim", 0)
            degraded = asyncio.run(_one_at_a_time(Settings(redis_url=server.url, namespace=ns)))
            trims = commandstats(admin).get("xtrim", 0) - before
        finally:
            stop_workers(procs)
        inboxes = list(admin.scan_iter(match=Keys.for_namespace(ns).inbox("*")))
        admin.close()
    assert not any(degraded)
    assert inboxes == []  # the client deletes its inbox when it closes
    # the workers' own trims of the request stream and the decision log are few; the
    # inbox's were one per request before
    assert 1 <= trims <= REQUESTS // INBOX_TRIM_EVERY + 10, trims
