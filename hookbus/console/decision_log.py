"""The decision log as the console's Decisions page reads it: rows that say what was asked,
what was decided and by which hook, filtered and paged back through history.

A row carries the tool and its input summed up (as the worker logged them), the hook whose
answer decided (the first hook of the trace that answered the final outcome), the chain's
time in milliseconds and its source: ``chain`` for blocking answers, ``fanout`` for the
runs of non-blocking hooks, which the page lists on their own. A parked ``ask`` whose
approval was answered later shows the answer: the decision log holds both entries, and
the later one is folded into the earlier.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from hookbus.bus.connection import bus_client, partition_client, translated
from hookbus.bus.decision_batch import expand
from hookbus.bus.keys import Keys
from hookbus.bus.wire import Decision, decode
from hookbus.errors import WireError

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings

#: Entries one read of a decision log takes (a batch entry holds up to 512 decisions).
READ_ENTRIES = 50
#: Most decisions one view looks at per partition: a busy log is never read whole.
SCAN_RECORDS = 5_000
#: Most entries a later read takes, once the first showed how many records an entry holds.
LARGE_READ = 500
#: The filters :func:`decisions` takes, which the Decisions page and the API read from the
#: query string. ``source`` is ``chain`` (the default), ``fanout`` or ``all``; ``before``
#: is an entry id: only older rows (the page's "older" link).
DECISION_FILTERS = ("agent", "session", "kind", "outcome", "hook", "source", "before")
#: The values ``source`` takes.
SOURCES = ("chain", "fanout", "all")


def decision_row(entry_id: Any, fields: dict[bytes, bytes], partition: int) -> dict[str, Any]:
    """One decision-log record as the console shows it (its trace decoded)."""
    raw_id = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)

    def text(name: bytes) -> str:
        value = fields.get(name, b"")
        return value.decode(errors="replace") if isinstance(value, bytes) else str(value)

    decision: Decision | None = None
    try:
        decision = decode(fields[b"d"], Decision) if b"d" in fields else None
    except WireError:
        decision = None
    fanout = text(b"type") == "hook_run"
    approval = decision.approval if decision is not None else None
    trace = decision.trace if decision is not None else []
    outcome = text(b"outcome")
    duration_us = int(text(b"duration_us") or 0)
    return {
        "entry": raw_id,
        "partition": partition,
        "at_ms": int(raw_id.split("-")[0]),
        "source": "fanout" if fanout else "chain",
        "id": text(b"id"),
        "kind": text(b"kind"),
        "outcome": outcome,
        "worker": text(b"worker"),
        "degraded": text(b"degraded") == "1",
        "duration_us": duration_us,
        "ms": round(duration_us / 1000, 1),
        "session": text(b"session"),
        "agent": text(b"agent"),
        "tool": text(b"tool"),
        "input": text(b"input"),
        "hook": text(b"hook") if fanout else _deciding_hook(outcome, trace),
        "reason": (decision.reason if decision is not None else text(b"error")) or None,
        "trace": [
            {
                "hook": r.hook_id,
                "outcome": r.outcome,
                "duration_us": r.duration_us,
                "error": r.error,
            }
            for r in trace
        ],
        "approval": (
            {
                "id": approval.id,
                "state": approval.state,
                "decided_by": approval.decided_by,
                "waited_ms": approval.waited_ms,
            }
            if approval is not None
            else None
        ),
    }


def _deciding_hook(outcome: str, trace: list[Any]) -> str:
    """The first hook whose answer was the final outcome; none for a plain allow."""
    if outcome == "allow":
        return ""
    for run in trace:
        if run.outcome == outcome:
            return str(run.hook_id)
    return ""


def decisions(
    settings: Settings,
    *,
    limit: int = 100,
    agent: str = "",
    session: str = "",
    kind: str = "",
    outcome: str = "",
    hook: str = "",
    source: str = "",
    before: str = "",
) -> list[dict[str, Any]]:
    """The newest decisions of every partition, newest first, filtered (each filter, when
    given, must match exactly; ``hook`` must be the deciding hook or in the trace)."""
    wanted = source if source in SOURCES else "chain"
    out: list[dict[str, Any]] = []
    for partition in range(settings.partitions):
        kept = 0
        for row in newest(settings, partition, before=before, page=LARGE_READ):
            if wanted != "all" and row["source"] != wanted:
                continue
            if _keep(row, agent, session, kind, outcome, hook):
                out.append(row)
                kept += 1
                if kept >= limit:
                    break
    out.sort(key=lambda r: (r["at_ms"], r["entry"]), reverse=True)
    return _fold_answers(out[:limit])


def _fold_answers(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Show a parked ask's later answer on its row (the answer's own row stays too)."""
    answered = {
        r["id"]: r["approval"]
        for r in rows
        if r["approval"] is not None and r["approval"]["state"] != "pending"
    }
    for row in rows:
        approval = row["approval"]
        if approval is not None and approval["state"] == "pending" and row["id"] in answered:
            row["approval"] = answered[row["id"]]
    return rows


def newest(
    settings: Settings,
    partition: int,
    *,
    since_ms: int | None = None,
    before: str = "",
    page: int = READ_ENTRIES,
) -> Iterator[dict[str, Any]]:
    """A partition's decisions, newest first, down to ``since_ms`` (epoch ms) and older
    than the entry id ``before`` when given, and at most :data:`SCAN_RECORDS` of them: a
    busy log is never read whole. Reads start at :data:`READ_ENTRIES` entries and grow up
    to ``page`` while entries are small, sized by the records an entry held so far (one
    batch entry holds up to 512 decisions), so a read never fetches far past the bound."""
    stream = Keys.for_partition(settings.namespace, partition).decisions
    client = bus_client(settings) if partition == 0 else partition_client(settings, partition)
    floor = str(since_ms) if since_ms is not None else "-"
    top: str | bytes = "(" + before if _entry_id(before) else "+"
    seen = read = 0
    count = min(page, READ_ENTRIES)
    while True:
        with translated(settings.effective_redis_url):
            entries: Any = client.xrevrange(stream, max=top, min=floor, count=count)
        for entry_id, fields in entries:
            read += 1
            for record in reversed(expand(fields or {})):
                seen += 1
                yield decision_row(entry_id, record, partition)
                if seen >= SCAN_RECORDS:
                    return
        if len(entries) < count:
            return
        last = entries[-1][0]
        top = b"(" + (last if isinstance(last, bytes) else str(last).encode())
        per_entry = max(1.0, seen / read)
        count = max(1, min(page, int((SCAN_RECORDS - seen) / per_entry) + 1))


def _entry_id(text: str) -> bool:
    """Whether ``text`` is a stream entry id (``ms-seq``): anything else is ignored."""
    ms, _, seq = text.partition("-")
    return ms.isdigit() and seq.isdigit() and len(text) <= 41


def _keep(
    row: dict[str, Any], agent: str, session: str, kind: str, outcome: str, hook: str
) -> bool:
    if agent and row["agent"] != agent:
        return False
    if session and row["session"] != session:
        return False
    if kind and row["kind"].lower() != kind.lower():
        return False
    if outcome and row["outcome"] != outcome:
        return False
    return not hook or row["hook"] == hook or any(t["hook"] == hook for t in row["trace"])
