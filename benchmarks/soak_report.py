"""Counting a soak run from its logs, and showing it (one screen of text, a PNG).

Blocking: every producer writes ``s`` before a call and ``r`` (or ``x``, an exception)
after, so ``lost`` = sent - answered, and ``late`` = answered after deadline + 15 ms while
the producer's own process was running (a late answer its host starved is counted apart, as
``late_starved``, with the evidence: see :func:`starved_ms`).
Events: the flood writes one ``p`` line per event the server acknowledged; the recording
hooks write one line per run; expected runs follow the hooks' match rules.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
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


#: A lag line of the older format (no ``stalls``) may reach this far past its stamp, plus
#: twice its worst oversleep, in s: the watcher closes a window on its first tick past
#: 1 s, and that tick and the one before it may each have overslept by the worst.
LEGACY_WINDOW_S = 1.05
#: Late calls listed with their evidence in the report, at most.
LATE_LISTED = 50


@dataclass(frozen=True, slots=True)
class Stall:
    """A span (monotonic s) in which a producer's lag watcher overslept its tick."""

    start: float
    end: float
    #: Of the oversleep, the ms the host did not run the process (its own CPU use taken out).
    starved_ms: float
    #: False for an older-format line: only its window and worst oversleep are known.
    exact: bool


def stalls_of(lines: Iterable[dict[str, Any]]) -> list[Stall]:
    """The stalls a producer log's ``lag`` lines record (``soak_producer.watch_lag``)."""
    out: list[Stall] = []
    for line in lines:
        if line.get("k") != "lag":
            continue
        if "stalls" in line:
            for start, over_ms, cpu_ms in line["stalls"]:
                starved = max(0.0, over_ms - cpu_ms)
                out.append(Stall(start, start + over_ms / 1000, starved, exact=True))
        elif line.get("max_ms", 0.0) > 0:
            worst = line["max_ms"]
            end = line.get("end", line["t"] + LEGACY_WINDOW_S + 2 * worst / 1000)
            out.append(Stall(line["t"], end, worst, exact=False))
    return out


def starved_ms(call: dict[str, Any], stalls: list[Stall]) -> float:
    """How many ms the host measurably withheld from ``call`` when it made the call late:
    the larger of two measures.

    The calling thread's own run-queue wait during the call (``rq``, Linux's schedstat:
    runnable, not run). The thread is blocked in the SDK for most of a call, runnable only
    when it sends and when the reply or its deadline wakes it, so that wait sits in
    practice where a late call lost its time: after the wake-up.

    Its process's lag watcher (:func:`stalls_of`): every stall, wherever it began (before
    the call, in another second, in another watcher window), for the part of it that falls
    between the call's deadline and its return (a stall that ended before the deadline
    cannot have made the call late: the SDK returns at its deadline), scaled by the share
    of it the host starved (the process's own CPU use during a stall is its own threads
    holding the GIL, not the host). The watcher also sees what the run queue does not: a
    stopped process, a stalled VM. An older-format window (worst oversleep only, somewhere
    in the window) that overlaps that part counts with its worst oversleep.
    """
    begin = call["t"] + call["dl"] / 1000
    finish = call["t"] + call["lat"] / 1000
    exact, coarse = 0.0, 0.0
    for stall in stalls:
        overlap = min(finish, stall.end) - max(begin, stall.start)
        if overlap <= 0:
            continue
        if stall.exact:
            exact += overlap / (stall.end - stall.start) * stall.starved_ms
        else:
            coarse = max(coarse, stall.starved_ms)
    return max(exact + coarse, float(call.get("rq", 0.0)))


def split_late(
    late: list[dict[str, Any]], stalls: dict[str, list[Stall]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Late calls as (the bus's, the host's). A late call is the host's only when the host
    measurably withheld at least as long as the call came back past the promise (deadline
    + 15 ms): without that starvation it would have kept the promise. Each call comes back
    with ``past_promise_ms`` and ``starved_ms`` (:func:`starved_ms`)."""
    bus: list[dict[str, Any]] = []
    host: list[dict[str, Any]] = []
    for a in late:
        past = a["lat"] - a["dl"] - LATE_SLACK_MS
        starved = starved_ms(a, stalls.get(a["src"], []))
        item = {**a, "past_promise_ms": round(past, 1), "starved_ms": round(starved, 1)}
        (host if starved >= past else bus).append(item)
    return bus, host


def late_calls(bus: list[dict[str, Any]], host: list[dict[str, Any]], t0: float
               ) -> list[dict[str, Any]]:  # fmt: skip
    """The late calls for the JSON report (at most :data:`LATE_LISTED`), ``t`` in s since
    the load began; ``starved`` says which are the host's (not in ``blocking.late``)."""
    keys = ("src", "id", "lat", "dl", "past_promise_ms", "starved_ms", "rq", "cpu", "deg", "why")
    out = [
        {"t": round(a["t"] - t0, 2), **{k: a.get(k) for k in keys}, "starved": starved}
        for group, starved in ((bus, False), (host, True))
        for a in group
    ]
    return sorted(out, key=lambda c: c["t"])[:LATE_LISTED]


#: How long after its start a fault may excuse a degraded answer, in s, when its record
#: does not say (``window_s``, else ``seconds`` + 2): the fault itself and the recovery it
#: promises (a killed worker's requests wait for its 2 s lease, a respawn takes ~2 s).
FAULT_WINDOW_S = {
    "kill_chain": 5.0, "stop_chain": 5.0, "redis_stall": 3.0, "reload": 10.0,
    "crash_hook": 5.0, "kill_fanout": 3.0, "poison": 3.0, "hang_hook": 3.0, "kill_rq": 3.0,
    "redis_restart": 4.0, "reused_event": 3.0, "gil_hook": 6.0, "hang_storm": 12.0,
}  # fmt: skip
#: Added to every window: a request sent just before a fault ended may still meet it, in s.
WINDOW_GRACE_S = 1.0


def fault_windows(record: list[dict[str, Any]], t_load: float) -> list[tuple[float, float, str]]:
    """(start, end, kind) of each injected fault, in monotonic s."""
    out = []
    for fault in record:
        span = fault.get("window_s")
        if span is None:
            span = fault["seconds"] + 2.0 if "seconds" in fault else None
        if span is None:
            span = FAULT_WINDOW_S.get(fault["kind"], 3.0) + fault.get("down_s", 0.0)
        start = t_load + fault["t"]
        out.append((start, start + span + WINDOW_GRACE_S, fault["kind"]))
    return out


#: A degraded answer outside every fault window is the host's when the lag watchers of at
#: least :data:`HOST_STALL_PROCESSES` producer processes each show the host withholding at
#: least this long during the call's deadline span, or in the second before it (the grace
#: every fault window gets, :data:`WINDOW_GRACE_S`: Redis and the workers, stopped with
#: everything else, then serve what queued up). Processes stalled together mean the host
#: was not running them, nor the workers and Redis on the same cores. Redis or a worker
#: stalling alone leaves the producers' watchers quiet.
HOST_STALL_MS = 50.0
HOST_STALL_PROCESSES = 2


def host_stalls_during(call: dict[str, Any], stalls: dict[str, list[Stall]]) -> dict[str, float]:
    """Per producer process, the longest host stall (starved ms) its lag watcher saw
    overlapping the call's span up to its deadline or the grace before it, for those of at
    least :data:`HOST_STALL_MS`."""
    lo, hi = call["t"] - WINDOW_GRACE_S, call["t"] + call["dl"] / 1000
    seen: dict[str, float] = {}
    for name, spans in stalls.items():
        worst = max(
            (s.starved_ms for s in spans if s.exact and s.end > lo and s.start < hi), default=0.0
        )
        if worst >= HOST_STALL_MS:
            seen[name] = round(worst, 1)
    return seen


def split_degraded(
    answers: list[dict[str, Any]],
    windows: list[tuple[float, float, str]],
    stalls: dict[str, list[Stall]],
    t0: float,
) -> dict[str, Any]:
    """Degraded answers inside a fault's window (the call's span overlaps it) and outside
    every window, the latter split into the host's (a host-wide stall measured during the
    call, :data:`HOST_STALL_MS`) and the spurious ones (nothing explains them), with the
    outside ones' reasons. ``t`` in the listed items is in s since the load began."""
    inside: Counter[str] = Counter()
    outside: list[dict[str, Any]] = []
    starved: list[dict[str, Any]] = []
    for a in answers:
        if not a["deg"]:
            continue
        lo, hi = a["t"], a["t"] + a["dl"] / 1000
        hit = next((kind for start, end, kind in windows if hi > start and lo < end), None)
        if hit is not None:
            inside[hit] += 1
            continue
        item = {k: a.get(k) for k in ("src", "id", "lat", "dl", "why")}
        item["t"] = round(a["t"] - t0, 2)
        seen = host_stalls_during(a, stalls)
        if len(seen) >= min(HOST_STALL_PROCESSES, len(stalls)):
            starved.append({**item, "host_stall_ms": seen})
        else:
            outside.append(item)
    reasons = Counter(re.sub(r"[0-9a-f]{8,}|\d+", "N", str(a["why"]))[:90] for a in outside)
    return {
        "inside": sum(inside.values()),
        "inside_by_fault": dict(inside),
        "outside": len(outside),
        "outside_reasons": dict(reasons.most_common(5)),
        "outside_items": outside[:10],
        "outside_starved": len(starved),
        "outside_starved_items": starved[:10],
    }


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
    errors: Counter[str] = Counter()
    for name, lines in logs.items():
        for line in lines:
            if line.get("k") == "s":
                sent[f"{name}/{line['id']}"] = line["t"]
            elif line.get("k") == "r":
                answers.append({**line, "src": name})
            elif line.get("k") == "x":
                errors[re.sub(r"\d+", "N", line.get("err", ""))[:120]] += 1
    answered = {f"{a['src']}/{a['id']}" for a in answers}
    stalls = {name: stalls_of(lines) for name, lines in logs.items()}
    late, starved = split_late([a for a in answers if a["lat"] > a["dl"] + LATE_SLACK_MS], stalls)
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
        "late_starved_items": starved,
        "stalls": stalls,
        "apart": summary,
        "wrong": len(wrong),
        "wrong_items": wrong[:5],
        "stale": _stale(answers, reloads),
        "errors": errors,
        "degraded_reasons": reasons,
        "degraded_by_source": Counter(a["src"] for a in degraded),
        "late_by_source": Counter(a["src"] for a in late),
        "late_starved_by_source": Counter(a["src"] for a in starved),
        "p50_ms": _pct([a["lat"] for a in answers if not a["deg"]], 0.50),
        "p99_ms": _pct([a["lat"] for a in answers if not a["deg"]], 0.99),
        "max_ms": round(max((a["lat"] for a in answers), default=0.0), 2),
    }


def count_events(
    logs: dict[str, list[dict[str, Any]]],
    runs_dir: Path,
    wipes: Sequence[tuple[float, float]] = (),
) -> dict[str, Any]:
    """Runs of the recorded hooks against the events published. ``wipes``: (from, to) spans
    in which Redis lost what it held; an event published in one that never ran went with
    Redis (``wiped``), it is not lost by the fleet."""
    expected: Counter[tuple[str, str]] = Counter()
    wiped_events: set[str] = set()
    published = 0
    publish_errors = 0
    for lines in logs.values():
        for line in lines:
            if line.get("k") == "p":
                published += 1
                if any(start <= line["t"] <= end for start, end in wipes):
                    wiped_events.add(line["e"])
                for hook, tool in RECORDED_ASYNC_HOOKS.items():
                    if tool is None or tool == line["tool"]:
                        expected[(line["e"], hook)] += 1
            elif line.get("k") == "pe":
                publish_errors += line.get("n", 0)
    run_lines = [r for r in _lines(runs_dir / "runs.jsonl") if r.get("h") in RECORDED_ASYNC_HOOKS]
    runs = Counter((r["e"], r["h"]) for r in run_lines)
    doubled = [p for p in expected if runs[p] > 1]
    # when and where each run of a doubled pair happened, to set beside the faults
    when: dict[tuple[str, str], list[list[Any]]] = {p: [] for p in doubled[:10]}
    for r in run_lines:
        if (r["e"], r["h"]) in when:
            when[(r["e"], r["h"])].append([r.get("t"), r.get("pid")])
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
        "lost": sum(1 for pair in expected if runs[pair] == 0 and pair[0] not in wiped_events),
        "wiped": sum(1 for pair in expected if runs[pair] == 0 and pair[0] in wiped_events),
        "doubled": sum(1 for pair in expected if runs[pair] > 1),
        "unexpected_runs": sum(n for pair, n in runs.items() if pair not in expected),
        "lost_pairs": [list(p) for p in expected if runs[p] == 0 and p[0] not in wiped_events][:10],
        "doubled_pairs": [[*p, runs[p]] for p in doubled[:10]],
        "doubled_runs": [[*p, when[p]] for p in doubled[:10]],
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
        f"lost {b['blocking.lost']}  wrong answers {blocking['wrong']}  "
        f"(late while the host starved the producer, not in late: "
        f"{b['blocking.late_starved']})"
    )
    windows = b.get("blocking.degraded_windows", {})
    print(
        f"          degraded inside fault windows {windows.get('inside')} "
        f"{windows.get('inside_by_fault')}; outside every window (spurious) "
        f"{windows.get('outside')} {windows.get('outside_reasons')}; outside while the "
        f"host stalled every producer (not spurious) {windows.get('outside_starved')}"
    )
    print(
        f"          latency (not degraded) p50 {blocking['p50_ms']} ms  p99 "
        f"{blocking['p99_ms']} ms  max (all) {blocking['max_ms']} ms"
    )
    print(
        f"events    published {b['events.published']}  expected runs "
        f"{b['events.expected_runs']}  runs {b['events.runs']}  lost {b['events.lost']}  "
        f"(gone with a wiped Redis {b.get('events.wiped', 0)})  "
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
        ("late while starved, by source", blocking["late_starved_by_source"]),
        ("degraded reasons", blocking["degraded_reasons"]),
        ("call errors", blocking["errors"]),
    ):
        if counter:
            items = "; ".join(f"{k} x{v}" for k, v in counter.most_common(5))
            print(f"{title}: {items}")
    t0 = extra.get("t_load", 0.0)
    for title, items in (("late", blocking["late_items"]),
                         ("late, starved", blocking["late_starved_items"])):  # fmt: skip
        for a in items[:5]:
            print(
                f"{title}: {a['src']}/{a['id']} at t={a['t'] - t0:.2f}s took {a['lat']:.0f} ms "
                f"(deadline {a['dl']} ms, {a['why'][:50]!r}); the host did not run it for "
                f"{a['starved_ms']} ms of it (its thread: {a.get('rq')} ms runnable but not "
                f"run, {a.get('cpu')} ms on a CPU)"
            )
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
    for event_id, hook, runs in e.get("doubled_runs", [])[:3]:
        print(f"  {hook} on {event_id} ran at: {beside_faults(runs, extra)}")


def beside_faults(runs: list[list[Any]], extra: dict[str, Any]) -> str:
    """Each run's time (s since the load began), pid and the last fault begun before it."""
    t0, out = extra.get("t_load", 0.0), []
    for t, pid in runs:
        if t is None:  # an older hooks folder: no time recorded
            out.append(f"pid {pid}")
            continue
        since = t - t0
        before = [f for f in extra["fault_record"] if f["t"] <= since]
        last = f"{before[-1]['kind']} at {before[-1]['t']:.2f}s" if before else "no fault yet"
        out.append(f"t={since:.2f}s pid {pid} (last fault: {last})")
    return "; ".join(out)


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
    for a in blocking["answers"]:
        x, y = a["t"] - t0, max(a["lat"], 0.01)
        groups["degraded" if a["deg"] else "ok"][0].append(x)
        groups["degraded" if a["deg"] else "ok"][1].append(y)
    ax.scatter(*groups["ok"], s=3, c="tab:blue", label="answered")
    ax.scatter(*groups["degraded"], s=5, c="tab:orange", label="degraded (policy answer)")
    for key, colour, label in (
        ("late_items", "red", "late (> deadline + 15 ms)"),
        ("late_starved_items", "purple", "late, producer starved by the host (not in late)"),
    ):
        xs = [a["t"] - t0 for a in blocking[key]]
        ax.scatter(xs, [a["lat"] for a in blocking[key]], s=25, c=colour, marker="x", label=label)
    ax.axhline(deadline_ms + LATE_SLACK_MS, color="red", lw=0.8, ls="--")
    ax.set_yscale("log")
    top = ax.get_ylim()[1]
    for start, end, _ in fault_windows(faults, 0.0):  # where a degraded answer is excused
        ax.axvspan(start, end, color="grey", alpha=0.12, lw=0)
    for f in faults:
        ax.axvline(f["t"], color="grey", lw=0.8, alpha=0.7)
        ax.text(f["t"], top, f["kind"], rotation=90, va="top", ha="right", fontsize=8)
    ax.set_xlabel("seconds since the load started")
    ax.set_ylabel("blocking request latency, ms (log)")
    ax.set_title("hookbus soak: blocking latency, faults marked, their windows shaded")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.09), ncol=4, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"latency plot written to {path}"
