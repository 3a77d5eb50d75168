"""What one blocking request costs Redis, counted so it cannot creep back (issue 16 point 1).

On a private redis-server (the shared one serves every other test at the same time), one
chain worker, sequential requests of the sync client and a burst of the asyncio client:
``INFO commandstats`` deltas (commands inside scripts count, and so does the EVALSHA that
runs them) with what the idle fleet costs over the same time subtracted. The bounds are
what this tree reaches (``docs/scaling.md`` explains why the issue's goal of 4 is not):
sync 7 = XADD request + XREAD reply + XREADGROUP + EVALSHA (XACK, XADD reply, XADD decision
log), 6 with ``streams.decision_log = "not_allow"``; async about 4.4 (3.4 with
``not_allow``) with reads, trims and reply-script calls batched.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from blocking import start_workers, stop_workers  # noqa: E402
from commands_per_request import measure  # noqa: E402

from tests.cluster_fixture import local_server  # noqa: E402

#: Most commands one sequential sync request may cost (7.0 measured, + background noise).
SYNC_MAX_COMMANDS = 7.1
#: Most commands one request may cost with 32 async requests in flight (4.4 measured: the
#: reads, trims and reply-script calls are batched; XACK and the reply XADD are not).
ASYNC_MAX_COMMANDS = 4.7


@pytest.fixture(scope="module")
def costs() -> tuple[object, object, float, float]:
    with local_server() as server:
        client = server.client()
        ns = f"cpr{uuid.uuid4().hex[:8]}"
        procs = start_workers(server.url, ns, 1, client)
        try:
            return measure(server.url, client, ns, requests=400, in_flight=32, idle_s=0.5)
        finally:
            stop_workers(procs)
            client.close()


def test_a_sequential_sync_request_costs_at_most_seven_redis_commands(costs: tuple) -> None:
    sync_cost = costs[0]
    assert sync_cost.commands_per_request <= SYNC_MAX_COMMANDS, sync_cost.per_command()
    per = dict(sync_cost.per_command())
    # one reply XADD (no PEXPIRE, no reply list created per request) and one XACK
    assert "pexpire" not in per and "rpush" not in per and "blpop" not in per, per
    assert per["xack"] == pytest.approx(1.0, abs=0.01), per


def test_async_requests_in_flight_cost_fewer_commands_each(costs: tuple) -> None:
    async_cost = costs[1]
    assert async_cost is not None
    assert async_cost.commands_per_request <= ASYNC_MAX_COMMANDS, async_cost.per_command()
    assert "pexpire" not in dict(async_cost.per_command()) or (
        dict(async_cost.per_command())["pexpire"] < 0.05
    )


def test_with_the_decision_log_narrowed_a_plain_allow_costs_one_command_less_and_async_4(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HOOKBUS_STREAMS__DECISION_LOG", "not_allow")  # the worker's env
    with local_server() as server:
        client = server.client()
        ns = f"cpr{uuid.uuid4().hex[:8]}"
        procs = start_workers(server.url, ns, 1, client)
        try:
            sync_cost, async_cost, _, _ = measure(
                server.url, client, ns, requests=400, in_flight=32, idle_s=0.5
            )
        finally:
            stop_workers(procs)
            client.close()
    # XADD request, XREAD reply, XREADGROUP, EVALSHA (XACK, XADD reply): 6
    assert sync_cost.commands_per_request <= 6.1, sync_cost.per_command()
    assert dict(sync_cost.per_command())["xadd"] == pytest.approx(2.0, abs=0.01)
    # batched: XADD request, XACK, XADD reply, and about 0.1 each of XREADGROUP, EVALSHA,
    # XREAD and XTRIM: the goal of 4 (3.4 measured)
    assert async_cost is not None
    assert async_cost.commands_per_request <= 3.8, async_cost.per_command()
