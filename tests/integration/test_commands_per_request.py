"""What one blocking request costs Redis, counted so it cannot creep back.

On a private redis-server (the shared one serves every other test at the same time), one
chain worker, sequential requests of the sync client and a burst of the asyncio client:
``INFO commandstats`` deltas (commands inside scripts count, and so does the EVALSHA that
runs them) with what the idle fleet costs over the same time subtracted.

A sequential sync request is four commands on its path: XADD request and XREAD reply (the
producer, one round trip), XREADGROUP and the reply's XADD (the worker, whose lease holds).
Its XACK and decision-log record are settled in bulk every 0.1 s by the worker's ack
ledger (EVALSHA, XPENDING, XACK, XADD, INCRBY for all of them): a few hundredths of a command per
request at these rates. The bounds allow four plus that timer-driven share for the run's
length, so a loaded host (fewer requests per flush) does not fail them and one command more
on every request's path (a whole command each) always does.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from blocking import start_workers, stop_workers  # noqa: E402
from commands_per_request import Cost, measure  # noqa: E402

from tests.cluster_fixture import local_server  # noqa: E402

#: The ledger's bulk settling runs on a timer, so each request's share of it grows as a
#: loaded host runs fewer requests per flush: these counts are measured with nothing else
#: running, in the serial timing run.
pytestmark = pytest.mark.timing

#: Commands on a sequential sync request's own path.
SYNC_PATH_COMMANDS = 4
#: Commands the fleet sends on timers while requests run, per second, beyond what the idle
#: measurement subtracts: the ack ledger's bulk settling (five commands every 0.1 s) and the
#: client's once-a-second liveness check (HGETALL + TIME) and heartbeat transactions, which a
#: short idle window may happen to miss. A request's share of them grows as a loaded host
#: runs fewer requests a second, so the bound is this rate times the run's length.
TIMER_COMMANDS_PER_S = 70
#: And the once-a-second work (stream trims, leases, the liveness check) that lands in a run
#: once or twice whatever its length: a short run does not average it away.
TIMER_COMMANDS_PER_RUN = 20
#: Of which XADDs (the ledger's batch entry, one per flush).
TIMER_XADDS_PER_S = 10


def sync_bound(cost: Cost) -> float:
    """Most commands a sequential request may cost: its path plus its share of the timers.

    A command added to every request's path adds a whole command per request, far above this
    share at any rate the host manages (0.02-0.04 measured at 3,000-4,000 requests a second).
    """
    timers = TIMER_COMMANDS_PER_S * cost.seconds + TIMER_COMMANDS_PER_RUN
    return SYNC_PATH_COMMANDS + timers / cost.requests


def xadd_bound(cost: Cost) -> float:
    return 2 + TIMER_XADDS_PER_S * cost.seconds / cost.requests + 0.01


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
    assert sync_cost.commands_per_request <= sync_bound(sync_cost), sync_cost.per_command()
    per = dict(sync_cost.per_command())
    # the request's and the reply's XADD, one read each side; no PEXPIRE, no reply list (the
    # idle fleet's own PEXPIREs, reader slots renewed once a second, are subtracted as
    # background, to within noise)
    assert 1.99 <= per["xadd"] <= xadd_bound(sync_cost), per  # + one per bulk flush
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
                server.url, client, ns, requests=400, in_flight=32, idle_s=2.0
            )
        finally:
            stop_workers(procs)
            client.close()
    # XADD request, XREAD reply, XREADGROUP, XADD reply; plain allows add no log record
    assert sync_cost.commands_per_request <= sync_bound(sync_cost), sync_cost.per_command()
    assert 1.99 <= dict(sync_cost.per_command())["xadd"] <= xadd_bound(sync_cost)
    assert async_cost is not None
    assert async_cost.commands_per_request <= ASYNC_MAX_COMMANDS, async_cost.per_command()
