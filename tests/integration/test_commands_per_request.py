"""What one blocking request costs Redis, counted so it cannot creep back (issue 16 point 1).

On a private redis-server (the shared one serves every other test at the same time), one
chain worker, sequential requests of the sync client and a burst of the asyncio client:
``INFO commandstats`` deltas (commands inside scripts count, and so does the EVALSHA that
runs them) with what the idle fleet costs over the same time subtracted.

A sequential sync request is four commands on its path: XADD request and XREAD reply (the
producer, one round trip), XREADGROUP and the reply's XADD (the worker, whose lease holds).
Its XACK and decision-log record are settled in bulk every 0.1 s by the worker's ack
ledger (EVALSHA, XPENDING, XACK, XADD, INCRBY for all of them): a few hundredths of a command per
request at these rates, which is the whole margin above 4 the bounds allow.
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

#: Most commands one sequential sync request may cost: its four, plus its share of the
#: ledger's bulk settling, five commands every 0.1 s (4.02-4.04 measured at 3,000-4,000
#: requests a second; a loaded CI host runs fewer requests per flush, hence the margin).
SYNC_MAX_COMMANDS = 4.1
#: Most commands one request may cost with 32 async requests in flight (2.4-2.65 measured:
#: the producer's reads and inbox trims and the worker's reads are batched; over only 400
#: requests the client's once-a-second liveness check, HGETALL + TIME, adds up to 0.16).
ASYNC_MAX_COMMANDS = 2.9


@pytest.fixture(scope="module")
def costs() -> tuple[object, object, float, float]:
    # the idle fleet's background (heartbeats, leases, the stream trimmer: about once a
    # second each) is measured over 2 s, long enough to see each of them
    with local_server() as server:
        client = server.client()
        ns = f"cpr{uuid.uuid4().hex[:8]}"
        procs = start_workers(server.url, ns, 1, client)
        try:
            return measure(server.url, client, ns, requests=400, in_flight=32, idle_s=2.0)
        finally:
            stop_workers(procs)
            client.close()


def test_a_sequential_sync_request_costs_four_redis_commands(costs: tuple) -> None:
    sync_cost = costs[0]
    assert sync_cost.commands_per_request <= SYNC_MAX_COMMANDS, sync_cost.per_command()
    per = dict(sync_cost.per_command())
    # the request's and the reply's XADD, one read each side; no PEXPIRE, no reply list (the
    # idle fleet's own PEXPIREs, reader slots renewed once a second, are subtracted as
    # background, to within noise)
    assert 1.99 <= per["xadd"] <= 2.03, per  # + one per bulk flush (its batch entry)
    assert per["xread"] == pytest.approx(1.0, abs=0.01), per
    assert per["xreadgroup"] == pytest.approx(1.0, abs=0.01), per
    assert per.get("pexpire", 0.0) < 0.02, per
    assert "rpush" not in per and "blpop" not in per, per
    # XACKs settled in bulk: far fewer than one per request, but settled all the same
    assert per.get("xack", 0.0) < 0.05, per


def test_async_requests_in_flight_cost_fewer_commands_each(costs: tuple) -> None:
    async_cost = costs[1]
    assert async_cost is not None
    assert async_cost.commands_per_request <= ASYNC_MAX_COMMANDS, async_cost.per_command()
    assert "pexpire" not in dict(async_cost.per_command()) or (
        dict(async_cost.per_command())["pexpire"] < 0.05
    )


def test_with_the_decision_log_narrowed_a_plain_allow_costs_the_same_four(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HOOKBUS_STREAMS__DECISION_LOG", "not_allow")  # the worker's env
    # the idle fleet's background (heartbeats, leases, the stream trimmer: about once a
    # second each) is measured over 2 s, long enough to see each of them
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
    # XADD request, XREAD reply, XREADGROUP, XADD reply; plain allows add no log record
    assert sync_cost.commands_per_request <= SYNC_MAX_COMMANDS, sync_cost.per_command()
    assert 1.99 <= dict(sync_cost.per_command())["xadd"] <= 2.03
    assert async_cost is not None
    assert async_cost.commands_per_request <= ASYNC_MAX_COMMANDS, async_cost.per_command()
