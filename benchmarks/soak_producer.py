"""One producer process of a soak run (started by ``benchmarks/soak.py``).

``--mode blocking``: ``HookBus.request`` at a fixed rate from a few threads; every call
writes a ``s`` (sent) line before and an ``r`` (returned) line after, so a call that never
returns is found as a ``s`` without its ``r``. ``--mode flood``: ``publish_many`` in
batches at a fixed rate, one ``p`` line per event the server acknowledged (with the tool
name, which decides which recording hooks must run), plus unmatched noise events.

``--skew-s S`` patches ``time.time``/``time.time_ns`` by S seconds *before* hookbus is
imported: this process's wall clock is wrong, as on a host whose clock drifted.
Latencies use ``time.monotonic`` (CLOCK_MONOTONIC, one clock for every process here).
Every loop ends at ``--seconds`` or on SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import threading
import time
from typing import IO, Any

#: Tool names of blocking requests and published events, in turn.
TOOLS = ("Bash", "Edit", "Read")
#: Every Nth blocking request carries the guard's deny marker.
DENY_EVERY = 10
#: Unmatched noise events per batch of the flood (kind Notification: no hook matches).
NOISE_PER_BATCH = 20


def _patch_clock(skew_s: float) -> None:
    real_time, real_time_ns = time.time, time.time_ns
    skew_ns = int(skew_s * 1e9)
    time.time = lambda: real_time() + skew_s
    time.time_ns = lambda: real_time_ns() + skew_ns


class Log:
    """JSON lines, one write + flush each, shared by threads."""

    def __init__(self, fh: IO[str]) -> None:
        self.fh = fh
        self.lock = threading.Lock()

    def write(self, **fields: Any) -> None:
        line = json.dumps(fields, separators=(",", ":")) + "\n"
        with self.lock:
            self.fh.write(line)
            self.fh.flush()


#: Linux's scheduler statistics of the calling thread: ns on a CPU, ns runnable but waiting
#: for one, time slices.
SCHEDSTAT = "/proc/thread-self/schedstat"


def thread_sched() -> tuple[float, float] | None:
    """This thread's (ms on a CPU, ms runnable but not run) so far; None where the kernel
    keeps no schedstat. The second is the host starving the thread, whatever the reason
    (other processes, a CPU quota); waiting for the GIL or for I/O is not in it."""
    try:
        with open(SCHEDSTAT, "rb") as fh:
            on_cpu, waiting, _slices = fh.read().split()
    except (OSError, ValueError):
        return None
    return int(on_cpu) / 1e6, int(waiting) / 1e6


def sched_since(before: tuple[float, float] | None) -> dict[str, float]:
    """The calling thread's ``cpu`` (ms on a CPU) and ``rq`` (ms runnable but not run)
    since ``before`` (:func:`thread_sched`), for a call's ``r`` line; empty when unknown."""
    after = thread_sched()
    if before is None or after is None:
        return {}
    return {"cpu": round(after[0] - before[0], 2), "rq": round(after[1] - before[1], 2)}


#: Period of the lag watcher's sleep, in s.
LAG_TICK_S = 0.01
#: An oversleep of the watcher's tick this large or more is logged as a stall, in ms.
STALL_MIN_MS = 2.0


def watch_lag(log: Log, stop: threading.Event, seconds: float) -> None:
    """Evidence of this process being starved of CPU (the host, not the bus, being slow).

    A thread sleeps :data:`LAG_TICK_S` again and again. Once a second it writes a ``lag``
    line: the window it covers (``t`` to ``end``, monotonic s), its worst oversleep
    (``max_ms``) and every oversleep of :data:`STALL_MIN_MS` or more as ``stalls``:
    ``[when the sleep should have ended, oversleep ms, this process's CPU ms meanwhile]``.
    An oversleep during which the process used little CPU is time the host did not run it;
    one with as much CPU as wall time is this process's own threads holding the GIL, which
    the report does not count as starvation. Each stall is stamped when it began, so the
    report matches it to the calls it overlapped, whatever window or second it fell in.
    """
    end = time.monotonic() + seconds + 5
    window_start, worst = time.monotonic(), 0.0
    stalls: list[list[float]] = []
    while not stop.is_set() and time.monotonic() < end:
        began, cpu_began = time.monotonic(), time.process_time()
        time.sleep(LAG_TICK_S)
        woke, cpu_woke = time.monotonic(), time.process_time()
        over_ms = (woke - began - LAG_TICK_S) * 1000
        worst = max(worst, over_ms)
        if over_ms >= STALL_MIN_MS:
            cpu_ms = (cpu_woke - cpu_began) * 1000
            stalls.append([round(began + LAG_TICK_S, 4), round(over_ms, 1), round(cpu_ms, 1)])
        if woke - window_start >= 1.0:
            log.write(k="lag", t=window_start, end=woke, max_ms=round(worst, 1), stalls=stalls)
            window_start, worst, stalls = woke, 0.0, []


def run_blocking(args: argparse.Namespace, log: Log, stop: threading.Event) -> None:
    from hookbus import HookBus
    from hookbus.bus.wire import Event

    bus = HookBus.from_url(args.url, args.namespace)
    start = time.monotonic()
    end = start + args.seconds
    total = int(args.seconds * args.rate)

    def worker(tid: int) -> None:
        for n in range(tid, total, args.threads):
            due = start + n / args.rate
            if stop.wait(max(0.0, due - time.monotonic())) or time.monotonic() >= end:
                return
            rid = f"{args.name}-{n}"
            command = f"echo {n}" if n % DENY_EVERY else f"echo {n} SOAK-DENY"
            event = Event(
                kind="PreToolUse",
                session_id=f"soak-{args.name}-{tid}",
                agent_id=args.name,
                payload={"tool_name": TOOLS[n % 3], "tool_input": {"command": command}},
            )
            log.write(k="s", id=rid, t=time.monotonic())
            # the clock starts after the log write (a lock and a flush to a busy disk): the
            # latency is the SDK call's own, as an agent calling request() would see it
            sched = thread_sched()
            t0 = time.monotonic()
            try:
                d = bus.request(event, deadline_ms=args.deadline_ms)
            except Exception as exc:  # counted as never returned; the log says why
                log.write(k="x", id=rid, t=t0, err=repr(exc)[:300])
                continue
            lat = (time.monotonic() - t0) * 1000
            log.write(
                k="r",
                id=rid,
                t=t0,
                lat=lat,
                **sched_since(sched),
                dl=args.deadline_ms,
                deg=bool(d.degraded),
                out=d.outcome,
                want="deny" if n % DENY_EVERY == 0 else "allow",
                why=(d.reason or "")[:160],
                w=d.worker,
            )

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(args.threads)]
    threading.Thread(target=watch_lag, args=(log, stop, args.seconds), daemon=True).start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(args.seconds + 30)
    bus.close()


def run_flood(args: argparse.Namespace, log: Log, stop: threading.Event) -> None:
    from hookbus import HookBus
    from hookbus.bus.wire import Event

    bus = HookBus.from_url(args.url, args.namespace)
    batch = max(1, int(args.batch))
    start = time.monotonic()
    batches = int(args.seconds * args.rate / batch)
    seq = 0
    for b in range(batches):
        due = start + b * batch / args.rate
        if stop.wait(max(0.0, due - time.monotonic())):
            break
        events = []
        for _ in range(batch):
            tool = TOOLS[seq % 3]
            seq += 1
            payload = {"tool_name": tool, "tool_response": {"ok": True}, "duration_ms": 5}
            events.append(Event(kind="PostToolUse", session_id=args.name, payload=payload))
        noise = [
            Event(kind="Notification", payload={"notification_type": "idle_prompt"})
            for _ in range(NOISE_PER_BATCH)
        ]
        t0 = time.monotonic()
        try:
            bus.publish_many(events + noise)
        except Exception as exc:  # not published: not expected to run
            log.write(k="pe", t=t0, n=len(events), err=repr(exc)[:300])
            continue
        for event in events:
            log.write(k="p", t=t0, e=event.id, tool=event.payload["tool_name"])
    bus.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mode", choices=("blocking", "flood"), required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--rate", type=float, required=True, help="requests or events per s")
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--deadline-ms", type=int, default=250)
    parser.add_argument("--skew-s", type=float, default=0.0)
    args = parser.parse_args()
    if args.skew_s:
        _patch_clock(args.skew_s)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with open(args.out, "a", encoding="utf-8") as fh:
        log = Log(fh)
        log.write(k="start", pid=os.getpid(), t=time.monotonic(), skew_s=args.skew_s)
        if args.mode == "blocking":
            run_blocking(args, log, stop)
        else:
            run_flood(args, log, stop)
        log.write(k="end", t=time.monotonic())


if __name__ == "__main__":
    main()
