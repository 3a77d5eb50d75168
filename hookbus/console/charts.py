"""The Overview's charts: decisions per interval by outcome, degraded answers, the chain's
p50 / p99 time, unguarded tool calls and how long answered approvals waited, over a range
the operator picks, drawn from what the fleet records (the decision log, the unguarded
calls).

The numbers come from the log the fleet already writes, so a chart costs the fleet no
work on the request path; reading it is bounded like every console view (the newest
:data:`~hookbus.console.decision_log.SCAN_RECORDS` decisions a partition, a page of entries
at a time). When a busy range holds more than that, the chart says from when it covers.
The geometry is computed here and drawn by the template as inline SVG: no script, no
library, nothing fetched from elsewhere.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from hookbus.bus.connection import bus_client
from hookbus.console.decision_log import LARGE_READ, SCAN_RECORDS, newest
from hookbus.workers.unguarded import report

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings

#: The ranges an operator can pick: name -> seconds.
RANGES = {"15m": 900, "1h": 3_600, "24h": 86_400}
DEFAULT_RANGE = "15m"
#: Intervals a chart is cut into.
BUCKETS = 30
#: Outcomes drawn in their own colour, bottom first; anything else is drawn as "other".
OUTCOMES = ("allow", "deny", "ask", "halt")
#: The drawing's size in SVG units (the page scales it to its width).
WIDTH = 600
HEIGHT = 120


def activity(settings: Settings, range_name: str = DEFAULT_RANGE) -> dict[str, Any]:
    """The chart data of ``range_name`` (an unknown name gets the default range)."""
    name = range_name if range_name in RANGES else DEFAULT_RANGE
    span_ms = RANGES[name] * 1000
    now = int(time.time() * 1000)
    start = now - span_ms
    step = span_ms // BUCKETS
    counts = [dict.fromkeys((*OUTCOMES, "other"), 0) for _ in range(BUCKETS)]
    degraded = [0] * BUCKETS
    durations: list[list[int]] = [[] for _ in range(BUCKETS)]
    waits: list[list[int]] = [[] for _ in range(BUCKETS)]
    covered_from = start
    for partition in range(settings.partitions):
        read = oldest = 0
        for row in newest(settings, partition, since_ms=start, page=LARGE_READ):
            read += 1
            oldest = row["at_ms"]
            if row["source"] != "chain" or row["at_ms"] < start:
                continue
            i = min((row["at_ms"] - start) // step, BUCKETS - 1)
            outcome = row["outcome"] if row["outcome"] in OUTCOMES else "other"
            counts[i][outcome] += 1
            degraded[i] += row["degraded"]
            durations[i].append(row["duration_us"])
            approval = row["approval"]
            if approval is not None and approval["waited_ms"] is not None:
                waits[i].append(int(approval["waited_ms"]))
        if read >= SCAN_RECORDS:  # the partition's log was read to its bound, not to start
            covered_from = max(covered_from, oldest)
    chart = _drawn(name, start, step, counts, degraded, durations, covered_from)
    chart["operator"] = _operator_chart(settings, start, step, waits)
    return chart


def _operator_chart(
    settings: Settings, start: int, step: int, waits: list[list[int]]
) -> dict[str, Any]:
    """Unguarded tool calls per bar (the latest the fleet keeps, :data:`report.KEEP` a
    partition) and the median time an answered approval waited, in SVG units."""
    unguarded = [0] * BUCKETS
    for call in report.recent(bus_client(settings), settings, limit=report.KEEP):
        if call.at_ms >= start:
            unguarded[min((call.at_ms - start) // step, BUCKETS - 1)] += 1
    top = max([*unguarded, 1])
    width = WIDTH / BUCKETS
    medians = [_quantile(w, 0.5) for w in waits]
    longest = max([v for v in medians if v is not None] + [1])
    return {
        "unguarded": sum(unguarded),
        "unguarded_top": top,
        "unguarded_bars": [
            {"x": i * width, "h": HEIGHT * n / top, "n": n, "at_ms": start + i * step}
            for i, n in enumerate(unguarded)
            if n
        ],
        "answered": sum(len(w) for w in waits),
        "longest_wait_s": round(longest / 1000, 1),
        "wait_p50": _line(medians, longest, width),
    }


def _drawn(
    name: str,
    start: int,
    step: int,
    counts: list[dict[str, int]],
    degraded: list[int],
    durations: list[list[int]],
    covered_from: int,
) -> dict[str, Any]:
    """Bars (stacked by outcome) and the p50 / p99 lines, in SVG units."""
    top = max([sum(c.values()) for c in counts] + [1])
    p50 = [_quantile(d, 0.5) for d in durations]
    p99 = [_quantile(d, 0.99) for d in durations]
    slowest = max([v for v in p99 if v is not None] + [1])
    width = WIDTH / BUCKETS
    bars: list[dict[str, Any]] = []
    for i, bucket in enumerate(counts):
        y = float(HEIGHT)
        for outcome, n in bucket.items():
            if n:
                h = HEIGHT * n / top
                y -= h
                bars.append({"x": i * width, "y": y, "w": width - 1, "h": h, "outcome": outcome,
                             "n": n, "at_ms": start + i * step})  # fmt: skip
    return {
        "range": name,
        "ranges": list(RANGES),
        "step": _step_text(step),
        "start_ms": start,
        "total": sum(sum(c.values()) for c in counts),
        "degraded": sum(degraded),
        "top": top,
        "bars": bars,
        "degraded_bars": [
            {"x": i * width, "h": HEIGHT * n / top, "n": n} for i, n in enumerate(degraded) if n
        ],
        "slowest_ms": round(slowest / 1000, 1),
        "p50": _line(p50, slowest, width),
        "p99": _line(p99, slowest, width),
        "truncated": covered_from > start,
        "covered_from_ms": covered_from,
    }


def _quantile(values: list[int], q: float) -> int | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


def _line(values: list[int | None], top: int, width: float) -> list[tuple[float, float]]:
    """The points of a line (SVG units) for the intervals that had decisions."""
    return [
        (round((i + 0.5) * width, 1), round(HEIGHT - (HEIGHT - 4) * v / top, 1))
        for i, v in enumerate(values)
        if v is not None
    ]


def _step_text(step_ms: int) -> str:
    seconds = step_ms // 1000
    return f"{seconds} s" if seconds < 120 else f"{seconds // 60} min"
