"""Counting a soak run from its logs, and showing it (one screen of text, a PNG).

Blocking: every producer writes ``s`` before a call and ``r`` (or ``x``, an exception)
after, so ``lost`` = sent - answered, and ``late`` = answered after deadline + 15 ms.
Events: the flood writes one ``p`` line per event the server acknowledged; the recording
hooks write one line per run; expected runs follow the hooks' match rules.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from soak_hooks import RECORDED_ASYNC_HOOKS, RECORDED_CHAIN_HOOK, RECORDED_GIL_HOOK

#: A reply later than deadline + this is late (issue 12, row 1), in ms.
LATE_SLACK_MS = 15.0


def _lines(path: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if not path.exists():
        return out
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue  # a line cut by a SIGKILL
    return out


def load(run_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Every producer log of the run, by producer name."""
    return {p.stem: _lines(p) for p in sorted((run_dir / "producers").glob("*.jsonl"))}


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


#: A deny answered this long after a reload began must come from the new hook code, in s.
RELOAD_GRACE_S = 10.0
_GENERATION = re.compile(r"generation (\d+)")


def _stale(answers: list[dict[str, Any]], reloads: list[tuple[float, int]]) -> int:
    """Denies that name an older guard generation well after a reload to a newer one."""
    stale = 0
    for a in answers:
        found = _GENERATION.search(a["why"]) if a["out"] == "deny" and not a["deg"] else None
        if found is None:
            continue
        current = max((g for t, g in reloads if t + RELOAD_GRACE_S < a["t"]), default=1)
        stale += int(found.group(1)) < current
    return stale


#: Producer logs counted apart from ``blocking.*`` (hostile traffic the harness sends).
APART = ("storm",)


def count_blocking(
    logs: dict[str, list[dict[str, Any]]], reloads: list[tuple[float, int]]
) -> dict[str, Any]:
    """``reloads``: (monotonic start, guard generation) of each reload fault. The logs
    named in :data:`APART` are summed into ``apart`` instead."""
    apart = {name: lines for name, lines in logs.items() if name in APART}
    logs = {name: lines for name, lines in logs.items() if name not in APART}
    summary = {
        name: Counter(
            "late" if line["lat"] > line["dl"] + LATE_SLACK_MS else
            ("degraded" if line["deg"] else line["out"])
            for line in lines if line.get("k") == "r"
        ) | Counter(sent=sum(1 for line in lines if line.get("k") == "s"))
        for name, lines in apart.items()
    }  # fmt: skip
    sent: dict[str, float] = {}
    answers: list[dict[str, Any]] = []
    lag: dict[tuple[str, int], float] = {}
    errors: Counter[str] = Counter()
    for name, lines in logs.items():
        for line in lines:
            if line.get("k") == "s":
                sent[f"{name}/{line['id']}"] = line["t"]
            elif line.get("k") == "r":
                answers.append({**line, "src": name})
            elif line.get("k") == "lag":
                lag[(name, int(line["t"]))] = line["max_ms"]
            elif line.get("k") == "x":
                errors[re.sub(r"\d+", "N", line.get("err", ""))[:120]] += 1
    answered = {f"{a['src']}/{a['id']}" for a in answers}
    late = [a for a in answers if a["lat"] > a["dl"] + LATE_SLACK_MS]
    # a late call whose own process overslept a 10 ms sleep by the lateness or more, in
    # the seconds the call spanned, was starved of CPU (the host, not the bus)
    starved = [
        a
        for a in late
        if max(lag.get((a["src"], int(a["t"]) + i), 0.0) for i in (0, 1, 2)) >= a["lat"] - a["dl"]
    ]
    degraded = [a for a in answers if a["deg"]]
    wrong = [a for a in answers if not a["deg"] and a.get("want") and a["out"] != a["want"]]
    reasons = Counter(re.sub(r"[0-9a-f]{8,}|\d+", "N", a["why"])[:90] for a in degraded)
    return {
        "sent": len(sent),
        "answered": len(answered & set(sent)),
        "degraded": len(degraded),
        "late": len(late),
        "lost": len(set(sent) - answered),
        "answers": answers,
        "late_items": late,
        "late_starved": len(starved),
        "apart": summary,
        "wrong": len(wrong),
        "wrong_items": wrong[:5],
        "stale": _stale(answers, reloads),
        "errors": errors,
        "degraded_reasons": reasons,
        "degraded_by_source": Counter(a["src"] for a in degraded),
        "late_by_source": Counter(a["src"] for a in late),
        "p50_ms": _pct([a["lat"] for a in answers if not a["deg"]], 0.50),
        "p99_ms": _pct([a["lat"] for a in answers if not a["deg"]], 0.99),
        "max_ms": round(max((a["lat"] for a in answers), default=0.0), 2),
    }


def count_events(logs: dict[str, list[dict[str, Any]]], runs_dir: Path) -> dict[str, Any]:
    expected: Counter[tuple[str, str]] = Counter()
    published = 0
    publish_errors = 0
    for lines in logs.values():
        for line in lines:
            if line.get("k") == "p":
                published += 1
                for hook, tool in RECORDED_ASYNC_HOOKS.items():
                    if tool is None or tool == line["tool"]:
                        expected[(line["e"], hook)] += 1
            elif line.get("k") == "pe":
                publish_errors += line.get("n", 0)
    runs = Counter(
        (r["e"], r["h"])
        for r in _lines(runs_dir / "runs.jsonl")
        if r.get("h") in RECORDED_ASYNC_HOOKS
    )
    chain_runs = Counter(
        (r["e"], r["h"])
        for r in _lines(runs_dir / "chain_runs.jsonl")
        if r.get("h") in (RECORDED_CHAIN_HOOK, RECORDED_GIL_HOOK)
    )
    return {
        "published": published,
        "publish_errors": publish_errors,
        "expected_runs": sum(expected.values()),
        "runs": sum(runs.values()),
        "lost": sum(1 for pair in expected if runs[pair] == 0),
        "doubled": sum(1 for pair in expected if runs[pair] > 1),
        "unexpected_runs": sum(n for pair, n in runs.items() if pair not in expected),
        "lost_pairs": [list(p) for p in expected if runs[p] == 0][:10],
        "doubled_pairs": [[*p, runs[p]] for p in expected if runs[p] > 1][:10],
        "chain_runs": sum(chain_runs.values()),
        "chain_doubled": sum(1 for n in chain_runs.values() if n > 1),
        "chain_doubled_by_hook": Counter(p[1] for p, n in chain_runs.items() if n > 1),
    }


def print_report(report: dict[str, Any], blocking: dict[str, Any], events: dict[str, Any],
                 extra: dict[str, Any]) -> None:  # fmt: skip
    """One screen: the counters, what was injected when, and what went wrong."""
    b, e = report, events
    load = "/".join(f"{x:.1f}" for x in extra["loadavg"])
    print(
        f"soak run: {extra['duration_s']:.0f} s of load, run folder {extra['run_dir']}, "
        f"host load average (1/5/15 min) at the end {load}"
    )
    print(
        f"blocking  sent {b['blocking.sent']}  answered {b['blocking.answered']}  "
        f"degraded {b['blocking.degraded']}  late {b['blocking.late']}  "
        f"lost {b['blocking.lost']}  wrong answers {blocking['wrong']}"
    )
    print(
        f"          latency (not degraded) p50 {blocking['p50_ms']} ms  p99 "
        f"{blocking['p99_ms']} ms  max (all) {blocking['max_ms']} ms"
    )
    print(
        f"events    published {b['events.published']}  expected runs "
        f"{b['events.expected_runs']}  runs {b['events.runs']}  lost {b['events.lost']}  "
        f"doubled {b['events.doubled']}  dead-lettered {b['events.dead_lettered']}  "
        f"unexpected runs {e['unexpected_runs']}  publish errors {e['publish_errors']}"
    )
    print(
        f"chain     recorded blocking runs {e['chain_runs']}, run more than once "
        f"{e['chain_doubled']} {dict(e['chain_doubled_by_hook'])}; stale hook code after a "
        f"reload {blocking['stale']}"
    )
    for name, counts in blocking["apart"].items():
        print(f"{name} (not in blocking.*): {dict(counts)}")
    for w in blocking["wrong_items"][:3]:
        print(f"wrong answer: {json.dumps(w)[:240]}")
    for title, counter in (
        ("degraded by source", blocking["degraded_by_source"]),
        ("late by source", blocking["late_by_source"]),
        (
            "late while the producer itself was starved of CPU",
            Counter({"calls": blocking["late_starved"]} if blocking["late_starved"] else {}),
        ),
        ("degraded reasons", blocking["degraded_reasons"]),
        ("call errors", blocking["errors"]),
    ):
        if counter:
            items = "; ".join(f"{k} x{v}" for k, v in counter.most_common(5))
            print(f"{title}: {items}")
    print("faults:")
    for f in extra["fault_record"]:
        detail = {k: v for k, v in f.items() if k not in ("kind", "t")}
        print(f"  t={f['t']:7.2f}s  {f['kind']:<14} {json.dumps(detail)[:90]}")
    for p in extra.get("poison", []):
        print(f"  poison: {json.dumps({k: v for k, v in p.items() if k not in ('k', 't')})[:300]}")
    exits = {
        n: m["unexpected_exits"] for n, m in report["memory"].items() if m.get("unexpected_exits")
    }
    if exits:
        print(f"unexpected exits (restarted by the harness): {json.dumps(exits)[:400]}")
    mem = "  ".join(
        f"{n} {m.get('rss_start_kb')}->{m.get('rss_end_kb')}" for n, m in report["memory"].items()
    )
    print(f"RSS KiB start->end: {mem}")
    print(f"streams: {json.dumps(report['streams'])[:400]}")
    if e["lost_pairs"]:
        print(f"first lost (event, hook): {e['lost_pairs'][:3]}")
    if e["doubled_pairs"]:
        print(f"first doubled (event, hook, runs): {e['doubled_pairs'][:3]}")


def draw(path: Path, blocking: dict[str, Any], faults: list[dict[str, Any]], t0: float,
         deadline_ms: int) -> str:  # fmt: skip
    """Latency over time with the faults marked; returns what happened, in words."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install 'hookbus[soak]'): no PNG"
    fig, ax = plt.subplots(figsize=(14, 6))
    groups: dict[str, tuple[list[float], list[float]]] = {"ok": ([], []), "degraded": ([], [])}
    late_x, late_y = [], []
    for a in blocking["answers"]:
        x, y = a["t"] - t0, max(a["lat"], 0.01)
        groups["degraded" if a["deg"] else "ok"][0].append(x)
        groups["degraded" if a["deg"] else "ok"][1].append(y)
        if a["lat"] > a["dl"] + LATE_SLACK_MS:
            late_x.append(x)
            late_y.append(y)
    ax.scatter(*groups["ok"], s=3, c="tab:blue", label="answered")
    ax.scatter(*groups["degraded"], s=5, c="tab:orange", label="degraded (policy answer)")
    ax.scatter(late_x, late_y, s=25, c="red", marker="x", label="late (> deadline + 15 ms)")
    ax.axhline(deadline_ms + LATE_SLACK_MS, color="red", lw=0.8, ls="--")
    ax.set_yscale("log")
    top = ax.get_ylim()[1]
    for f in faults:
        ax.axvline(f["t"], color="grey", lw=0.8, alpha=0.7)
        ax.text(f["t"], top, f["kind"], rotation=90, va="top", ha="right", fontsize=8)
    ax.set_xlabel("seconds since the load started")
    ax.set_ylabel("blocking request latency, ms (log)")
    ax.set_title("hookbus soak: blocking latency with faults marked")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.09), ncol=3, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"latency plot written to {path}"
