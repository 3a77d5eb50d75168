"""The soak report's late answers: the bus's are counted, the host's are told apart.

A producer's lag watcher records the stalls of its own process (``soak_producer.watch_lag``)
and each call its thread's run-queue wait (``rq``); a late answer is the host's
(``late_starved``, not in ``late``) only when the host withheld at least as long as the call
came back past the promise (deadline + 15 ms), in the part of the call after its deadline.
The logs here are synthetic lines in the format the producer writes. Every call below starts
at 100.2 (or as said), has a 250 ms deadline and takes 400 ms: 135 ms past the promise.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import soak_report  # noqa: E402

DEADLINE_MS = 250


def _call(rid: str, t: float, lat_ms: float, **sched: float) -> list[dict[str, Any]]:
    """The ``s`` and ``r`` lines of one call that started at ``t`` and took ``lat_ms``
    (``sched``: its thread's ``cpu`` and ``rq`` ms during the call)."""
    return [
        {"k": "s", "id": rid, "t": t},
        {
            "k": "r", "id": rid, "t": t, "lat": lat_ms, **sched, "dl": DEADLINE_MS,
            "deg": False, "out": "allow", "want": "allow", "why": "", "w": "chain-1",
        },
    ]  # fmt: skip


def _lag(t: float, end: float, stalls: list[list[float]]) -> dict[str, Any]:
    """A lag line: the window ``t``-``end`` and its stalls ``[start, oversleep ms, CPU ms]``."""
    worst = max((s[1] for s in stalls), default=0.0)
    return {"k": "lag", "t": t, "end": end, "max_ms": worst, "stalls": stalls}


def _count(lines: list[dict[str, Any]]) -> dict[str, Any]:
    return soak_report.count_blocking({"p1": lines}, [])


def test_a_stall_that_began_a_second_before_the_call_excuses_it() -> None:
    # the stall began at 99.2 (in the second before the call's, in a window stamped 99.1)
    # and the host ran the process again at 100.59: 140 ms past the call's deadline (100.45)
    lines = [
        _lag(98.1, 99.1, []),
        _lag(99.1, 100.59, [[99.2, 1390.0, 0.4]]),
        *_call("p1-1", 100.2, 400.0),
    ]
    counted = _count(lines)
    assert (counted["late"], counted["late_starved"]) == (0, 1)
    assert counted["answered"] == counted["sent"] == 1
    (item,) = counted["late_starved_items"]
    assert item["past_promise_ms"] == 135.0
    assert 139.0 <= item["starved_ms"] <= 140.0


def test_an_older_lag_line_stamped_a_second_before_the_call_excuses_it() -> None:
    # older logs: the worst oversleep of a window, stamped where the window began
    lines = [{"k": "lag", "t": 99.6, "max_ms": 420.0}, *_call("p1-1", 100.3, 400.0)]
    counted = _count(lines)
    assert (counted["late"], counted["late_starved"]) == (0, 1)


def test_a_late_call_without_a_stall_is_late() -> None:
    lines = [_lag(99.0, 100.0, []), *_call("p1-1", 100.2, 400.0), _lag(100.0, 101.0, [])]
    counted = _count(lines)
    assert (counted["late"], counted["late_starved"]) == (1, 0)
    assert counted["late_by_source"] == {"p1": 1}


def test_a_stall_that_ended_before_the_call_began_excuses_nothing() -> None:
    # same second, large enough, but over by the time the call started
    lines = [_lag(100.0, 101.0, [[100.05, 500.0, 0.3]]), *_call("p1-1", 100.7, 400.0)]
    counted = _count(lines)
    assert (counted["late"], counted["late_starved"]) == (1, 0)


def test_a_stall_that_ended_before_the_deadline_excuses_nothing() -> None:
    # the call was waiting for its reply anyway: it would have returned at its deadline
    lines = [_lag(100.0, 101.0, [[100.25, 150.0, 0.3]]), *_call("p1-1", 100.2, 400.0)]
    counted = _count(lines)
    assert (counted["late"], counted["late_starved"]) == (1, 0)


def test_a_stall_shorter_than_the_lateness_excuses_nothing() -> None:
    # 100 ms of starvation past the deadline does not explain a call 135 ms past the promise
    lines = [_lag(100.0, 101.0, [[100.47, 100.0, 0.2]]), *_call("p1-1", 100.2, 400.0)]
    counted = _count(lines)
    assert (counted["late"], counted["late_starved"]) == (1, 0)


def test_a_stall_the_process_spent_on_its_own_cpu_excuses_nothing() -> None:
    # the watcher overslept 400 ms while this process burned 390 ms of CPU: its own threads
    # held the GIL, the host did not starve it
    lines = [_lag(100.0, 101.0, [[100.45, 400.0, 390.0]]), *_call("p1-1", 100.2, 400.0)]
    counted = _count(lines)
    assert (counted["late"], counted["late_starved"]) == (1, 0)


def test_a_call_whose_thread_waited_for_a_cpu_by_the_lateness_is_excused() -> None:
    # no stall of the watcher, but the calling thread itself sat 136 ms in the run queue
    lines = [_lag(100.0, 101.0, []), *_call("p1-1", 100.2, 400.0, cpu=1.5, rq=136.0)]
    counted = _count(lines)
    assert (counted["late"], counted["late_starved"]) == (0, 1)


def test_a_timeout_whose_wake_up_waited_for_a_cpu_is_excused() -> None:
    # as measured on a busy 2-core host: 266.4 ms for a 250 ms deadline, 15.4 ms of it in
    # the run queue; without that wait the call would have returned at 251 ms
    lines = [_lag(100.0, 101.0, []), *_call("p1-1", 100.2, 266.4, cpu=0.7, rq=15.4)]
    counted = _count(lines)
    assert (counted["late"], counted["late_starved"]) == (0, 1)


def test_a_call_whose_thread_waited_less_than_the_lateness_is_late() -> None:
    lines = [_lag(100.0, 101.0, []), *_call("p1-1", 100.2, 400.0, cpu=1.5, rq=130.0)]
    counted = _count(lines)
    assert (counted["late"], counted["late_starved"]) == (1, 0)


def test_another_producers_stall_excuses_nothing() -> None:
    logs = {
        "p1": _call("p1-1", 100.2, 400.0),
        "p2": [_lag(100.0, 101.0, [[100.45, 400.0, 0.1]])],
    }
    counted = soak_report.count_blocking(logs, [])
    assert (counted["late"], counted["late_starved"]) == (1, 0)


def test_the_json_lists_both_kinds_of_late_call_with_their_evidence() -> None:
    lines = [
        _lag(99.1, 100.59, [[99.2, 1390.0, 0.4]]),
        *_call("p1-1", 100.2, 400.0),
        *_call("p1-2", 103.0, 300.0),
        *_call("p1-3", 104.0, 12.0),
    ]
    counted = _count(lines)
    listed = soak_report.late_calls(counted["late_items"], counted["late_starved_items"], 90.0)
    assert [(c["id"], c["t"], c["starved"]) for c in listed] == [
        ("p1-1", 10.2, True),
        ("p1-2", 13.0, False),
    ]
    assert listed[1]["starved_ms"] == 0.0 and listed[1]["past_promise_ms"] == 35.0


def test_a_doubled_event_run_is_shown_beside_the_fault_before_each_run(tmp_path: Path) -> None:
    logs = {"flood": [{"k": "p", "t": 140.0, "e": "ev1", "tool": "Read"}]}
    runs = [
        {"e": "ev1", "h": "soak-runs", "pid": 11, "t": 145.02},
        {"e": "ev1", "h": "soak-runs", "pid": 12, "t": 187.5},
    ]
    (tmp_path / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
    counted = soak_report.count_events(logs, tmp_path)
    assert (counted["expected_runs"], counted["doubled"], counted["lost"]) == (1, 1, 0)
    (doubled,) = counted["doubled_runs"]
    assert doubled == ["ev1", "soak-runs", [[145.02, 11], [187.5, 12]]]
    faults = [{"kind": "kill_rq", "t": 37.2}, {"kind": "redis_restart", "t": 45.0}]
    shown = soak_report.beside_faults(doubled[2], {"t_load": 100.0, "fault_record": faults})
    assert shown == (
        "t=45.02s pid 11 (last fault: redis_restart at 45.00s); "
        "t=87.50s pid 12 (last fault: redis_restart at 45.00s)"
    )


def _degraded(rid: str, t: float) -> dict[str, Any]:
    return {
        "k": "r", "id": rid, "t": t, "lat": 251.0, "dl": DEADLINE_MS, "deg": True,
        "out": "deny", "want": "allow", "why": "no chain worker answered within 250 ms",
    }  # fmt: skip


def _split(logs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    blocking = soak_report.count_blocking(logs, [])
    windows = [(100.0, 110.0, "kill_chain")]
    return soak_report.split_degraded(blocking["answers"], windows, blocking["stalls"], 0.0)


def test_a_degraded_answer_in_a_fault_window_is_the_fault_s() -> None:
    split = _split({"p1": [_degraded("a", 105.0)], "p2": []})
    assert (split["inside"], split["outside"], split["outside_starved"]) == (1, 0, 0)


def test_a_degraded_answer_outside_every_window_with_quiet_watchers_is_spurious() -> None:
    quiet = [_lag(199.0, 203.0, [[200.05, 20.0, 0.0]])]
    split = _split({"p1": [_degraded("a", 200.0), *quiet], "p2": quiet})
    assert (split["outside"], split["outside_starved"]) == (1, 0)
    assert split["outside_items"][0]["id"] == "a"


def test_one_producer_stalling_alone_excuses_nothing() -> None:
    split = _split(
        {"p1": [_degraded("a", 200.0), _lag(199.0, 203.0, [[200.05, 200.0, 0.0]])], "p2": []}
    )
    assert (split["outside"], split["outside_starved"]) == (1, 0)


def test_a_stall_the_producers_spent_on_their_own_cpu_excuses_nothing() -> None:
    busy = [_lag(199.0, 203.0, [[200.05, 200.0, 190.0]])]
    split = _split({"p1": [_degraded("a", 200.0), *busy], "p2": busy})
    assert (split["outside"], split["outside_starved"]) == (1, 0)


def test_every_producer_stalled_during_the_call_makes_it_the_host_s_with_the_evidence() -> None:
    host = [_lag(199.0, 203.0, [[200.1, 120.0, 1.0]])]
    split = _split({"p1": [_degraded("a", 200.0), *host], "p2": host})
    assert (split["outside"], split["outside_starved"]) == (0, 1)
    assert split["outside_starved_items"][0]["host_stall_ms"] == {"p1": 119.0, "p2": 119.0}


def test_a_host_stall_after_the_deadline_excuses_nothing() -> None:
    late = [_lag(199.0, 203.0, [[200.3, 120.0, 0.0]])]
    split = _split({"p1": [_degraded("a", 200.0), *late], "p2": late})
    assert (split["outside"], split["outside_starved"]) == (1, 0)


def test_a_host_stall_that_ended_in_the_second_before_the_call_excuses_it() -> None:
    """Redis and the workers, stopped with the host, then serve what queued up: the same
    grace a fault window gets."""
    before = [_lag(198.0, 203.0, [[199.2, 600.0, 2.0]])]
    split = _split({"p1": [_degraded("a", 200.0), *before], "p2": before})
    assert (split["outside"], split["outside_starved"]) == (0, 1)


def test_a_host_stall_over_a_second_before_the_call_excuses_nothing() -> None:
    earlier = [_lag(196.0, 203.0, [[197.0, 600.0, 2.0]])]
    split = _split({"p1": [_degraded("a", 200.0), *earlier], "p2": earlier})
    assert (split["outside"], split["outside_starved"]) == (1, 0)
