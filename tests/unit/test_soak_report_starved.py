"""A producer the host stops mid-call: its lag watcher sees it, the report excuses the call.

End to end on a real process: the soak producer's lag watcher (``soak_producer.watch_lag``)
runs in a child process beside two threads that make 100 ms "calls" back to back (a sleep
stands in for the bus, so only the host can make one late); the test SIGSTOPs the child
for 0.5 s, as a starved host does, and counts its log with ``soak_report``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import soak_report  # noqa: E402

#: The child: a lag watcher and two threads of 100 ms calls (250 ms deadline), offset by
#: 50 ms so that one is always in flight, logged as a blocking producer logs them.
CHILD = """
import sys, threading, time
sys.path.insert(0, sys.argv[1])
from soak_producer import Log, watch_lag

log = Log(open(sys.argv[2], "a", encoding="utf-8"))
stop = threading.Event()
threading.Thread(target=watch_lag, args=(log, stop, 4.0), daemon=True).start()

def calls(tid):
    time.sleep(0.05 * tid)
    for n in range(25):
        rid = f"p1-{tid}-{n}"
        log.write(k="s", id=rid, t=time.monotonic())
        t0 = time.monotonic()
        time.sleep(0.1)
        lat = (time.monotonic() - t0) * 1000
        log.write(k="r", id=rid, t=t0, lat=lat, dl=250, deg=False, out="allow", want="allow",
                  why="", w="fake")

log.write(k="start", t=time.monotonic())
threads = [threading.Thread(target=calls, args=(i,)) for i in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
time.sleep(1.2)  # the watcher writes the window that holds the last call
stop.set()
"""


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_calls_late_because_the_host_stopped_their_process_are_counted_apart(
    tmp_path: Path,
) -> None:
    (tmp_path / "producers").mkdir()
    log_path = tmp_path / "producers" / "p1.jsonl"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(BENCHMARKS), str(log_path)])
    try:
        deadline = time.monotonic() + 30
        while '"k":"start"' not in (log_path.read_text() if log_path.exists() else ""):
            assert time.monotonic() < deadline, "the child did not start within 30 s"
            time.sleep(0.05)
        time.sleep(1.0)
        child.send_signal(signal.SIGSTOP)
        time.sleep(0.5)
        child.send_signal(signal.SIGCONT)
        assert child.wait(30) == 0
    finally:
        child.send_signal(signal.SIGCONT)
        if child.poll() is None:
            child.kill()
            child.wait(5)
    counted = soak_report.count_blocking(soak_report.load(tmp_path), [])
    assert counted["sent"] == counted["answered"] == 50
    assert counted["late"] == 0, counted["late_items"]
    assert counted["late_starved"] >= 1, counted
    for call in counted["late_starved_items"]:
        assert call["starved_ms"] >= call["past_promise_ms"] > 0
