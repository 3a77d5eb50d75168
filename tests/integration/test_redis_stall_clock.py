"""After a Redis stall, fresh requests are answered by the hooks, not dropped as expired.

A chain worker judges each request's deadline on Redis's clock, estimated from TIME samples.
A TIME sent just before Redis was paused comes back after the pause: its round trip spans
the stall, and an offset taken at its midpoint would run the worker's clock up to half the
stall fast, so fresh requests would look expired until the next sample. The worker keeps
the sample with the shortest round trip, so nothing outside the stall is answered degraded.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from hookbus import AsyncHookBus
from hookbus.bus.connection import close_pools
from tests.cluster_fixture import local_server
from tests.worst_day_helpers import Load, chain_workers

#: Requests per second, their deadline (ms), the stall (s) and when it starts (s).
RATE, DEADLINE_MS, STALL_S, STALL_AT_S = 40, 300, 2.5, 3.0
#: After Redis resumes, the backlog it buffered is drained first: this long still counts as
#: the stall's own window (shorter than the worker's one-second clock refresh).
GRACE_S = 0.3


@pytest.mark.timing  # 300 ms deadlines on either side of the stall: no other load may run
def test_a_redis_stall_causes_no_degraded_answer_outside_it() -> None:
    with local_server() as server, chain_workers(server.url, "stall"):
        assert server.proc is not None
        pid = server.proc.pid

        async def main() -> tuple[Load, tuple[float, float]]:
            bus = AsyncHookBus.from_url(server.url, "stall")
            load = Load(bus, RATE, DEADLINE_MS)
            try:
                sending = asyncio.create_task(load.run(9.0))
                await asyncio.sleep(STALL_AT_S)
                stopped = time.monotonic()
                os.kill(pid, signal.SIGSTOP)
                await asyncio.sleep(STALL_S)
                os.kill(pid, signal.SIGCONT)
                resumed = time.monotonic()
                await sending
            finally:
                os.kill(pid, signal.SIGCONT)
                await bus.close()
            return load, (stopped, resumed + GRACE_S)

        load, window = asyncio.run(main())
        close_pools()
    outside = load.degraded_outside([window])
    total = len(load.answers)
    assert total > 300
    assert not outside, (
        f"{len(outside)} of {total} answers degraded outside the stall: "
        f"{[(round(a.sent - window[1], 2), a.reason) for a in outside[:5]]}"
    )
    assert not load.late(), f"{len(load.late())} answers came after their deadline"
