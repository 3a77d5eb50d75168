"""Unguarded-call detection at scale, on a private redis-server (nobody else's commands in
the counts) and a real ``hookbus dev`` fleet: 10,000 guarded calls, each post event sent
the moment its guard answered, add no unguarded false positive; the lookup costs at most
one Redis command per post event; an unguarded call is recorded within 2 s.

Timed (a mark is written up to 0.1 s after its answer, a lookup waits 1 s for it), so it
runs in the serial timing run with nothing else on the host.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from hookbus import HookBus
from hookbus.bus.settings.loader import Settings
from hookbus.workers.unguarded import report
from tests.cluster_fixture import commandstats, local_server
from tests.fanout_helpers import wait_for
from tests.unguarded_helpers import dev_fleet, tool_call

pytestmark = pytest.mark.timing

CALLS = 10_000


def test_ten_thousand_guarded_calls_add_no_false_positive_and_a_real_one_shows_in_2_s(
    tmp_path: Path,
) -> None:
    with local_server() as server:
        client = server.client()
        ns = f"ug{uuid.uuid4().hex[:8]}"
        settings = Settings(redis_url=server.url, namespace=ns)
        with dev_fleet(server.url, ns, tmp_path), HookBus(settings) as bus:
            before = commandstats(client)
            for i in range(CALLS):
                harness = "copilot" if i % 2 else "claude-code"  # by input, and by id
                call_id = None if i % 2 else f"toolu_{i}"
                command = f"echo {i}"
                decision = bus.request(
                    tool_call("PreToolUse", command, call_id=call_id, harness=harness),
                    deadline_ms=5_000,
                )
                assert decision.outcome == "allow" and not decision.degraded, decision
                bus.publish(tool_call("PostToolUse", command, call_id=call_id, harness=harness))
            sent = time.monotonic()
            bus.publish(tool_call("PostToolUse", "echo nobody asked", session="s-unguarded"))
            wait_for(
                lambda: bool(report.recent(client, settings)),
                10,
                "the unguarded call recorded",
            )
            took_s = time.monotonic() - sent
            after = commandstats(client)
            calls = report.recent(client, settings, limit=100)
        client.close()
    lookups = after.get("zmscore", 0) - before.get("zmscore", 0)
    print(f"unguarded call recorded {took_s:.2f} s after its post event; {lookups} ZMSCORE")
    assert [c.session for c in calls] == ["s-unguarded"], calls[:5]
    assert took_s <= 2.0, took_s
    assert 0 < lookups <= CALLS + 1, lookups
