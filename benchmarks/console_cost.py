"""What one refresh of each console page costs Redis: commands and server time.

Run: ``python benchmarks/console_cost.py [--decisions N] [--batch K]``

Starts a private redis-server (nobody else's commands in the counts), fills a namespace's
decision log with N decisions spread over the last hour, written as a chain worker writes
them (entries of K records each, the ack ledger's batches), then reads each page's data the
way the console does (the same library calls its handlers make) and prints, per page, the
Redis commands one refresh sends (``INFO commandstats`` deltas) and the median wall time of
five refreshes. The Overview refreshes at most once a second while decisions arrive
(``data-min``) and every five seconds otherwise; the other pages refresh on their events.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

import redis  # noqa: E402

from hookbus.bus.decision_batch import DecisionRecord, encode_record, join_records  # noqa: E402
from hookbus.bus.keys import Keys  # noqa: E402
from hookbus.bus.settings.loader import Settings  # noqa: E402
from hookbus.bus.wire import Decision, HookRun, encode  # noqa: E402
from hookbus.console import charts, data, decision_log  # noqa: E402
from tests.cluster_fixture import commandstats, delta, local_server  # noqa: E402

#: Commands the measurement itself sends (left out of the counts).
OWN_COMMANDS = frozenset({"info"})


def fill(client: redis.Redis, settings: Settings, decisions: int, batch: int) -> None:
    """``decisions`` records over the last hour, ``batch`` to an entry, oldest first."""
    stream = Keys.for_namespace(settings.namespace).decisions
    now = int(time.time() * 1000)
    step = max(1, 3_600_000 // max(1, decisions // batch))
    run = HookRun(hook_id="guard", outcome="deny")
    deny = encode(Decision(outcome="deny", reason="no", trace=[run]))
    written = 0
    at = now - 3_600_000
    while written < decisions:
        n = min(batch, decisions - written)
        records = [
            encode_record(
                DecisionRecord(
                    id=uuid.uuid4().hex.encode(), kind=b"PreToolUse", outcome=b"deny",
                    worker=b"w1", entry=b"1-1", degraded=b"0", duration_us=b"180",
                    session=b"s1", agent=b"a1", d=deny, tool=b"Bash", input=b"rm -rf /",
                )
            )
            for _ in range(n)
        ]  # fmt: skip
        client.xadd(stream, {"b": join_records(records), "n": str(n)}, id=f"{at}-*")
        written += n
        at = min(now, at + step)


def refresh_cost(client: redis.Redis, view: Callable[[], Any]) -> tuple[int, float, str]:
    """(commands of one refresh, median ms of five, the commands by name)."""
    before = commandstats(client)
    view()
    calls = {k: v for k, v in delta(before, commandstats(client)).items() if k not in OWN_COMMANDS}
    times = []
    for _ in range(5):
        start = time.perf_counter()
        view()
        times.append((time.perf_counter() - start) * 1000)
    by_name = ", ".join(f"{name} {n}" for name, n in sorted(calls.items(), key=lambda c: -c[1]))
    return sum(calls.values()), statistics.median(times), by_name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    with local_server() as server:
        settings = Settings(redis_url=server.url, namespace=f"cc{uuid.uuid4().hex[:8]}")
        client = redis.Redis.from_url(server.url)
        fill(client, settings, args.decisions, args.batch)
        views: dict[str, Callable[[], Any]] = {
            "Overview (cards, tables)": lambda: data.overview(settings),
            "Overview chart, 15m": lambda: charts.activity(settings, "15m"),
            "Overview chart, 24h": lambda: charts.activity(settings, "24h"),
            "Decisions (200 rows)": lambda: decision_log.decisions(settings, limit=200),
            "Decisions, one agent": lambda: decision_log.decisions(settings, agent="none"),
            "Approvals": lambda: data.approvals(settings),
        }
        print(f"{args.decisions:,} decisions in the log, {args.batch} to an entry")
        print(f"{'page':28} {'commands':>8} {'median ms':>10}  commands by name")
        for name, view in views.items():
            n, ms, by_name = refresh_cost(client, view)
            print(f"{name:28} {n:8d} {ms:10.1f}  {by_name}")


if __name__ == "__main__":
    main()
