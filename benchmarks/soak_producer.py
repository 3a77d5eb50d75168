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


def watch_lag(log: Log, stop: threading.Event, seconds: float) -> None:
    """Once a second, the worst oversleep of a 10 ms sleep in this process: when it is
    large, a late answer was this process starved of CPU, not the bus being slow."""
    end = time.monotonic() + seconds + 5
    window_start, worst = time.monotonic(), 0.0
    while not stop.is_set() and time.monotonic() < end:
        began = time.monotonic()
        time.sleep(0.01)
        worst = max(worst, (time.monotonic() - began - 0.01) * 1000)
        if began - window_start >= 1.0:
            log.write(k="lag", t=window_start, max_ms=round(worst, 1))
            window_start, worst = time.monotonic(), 0.0


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
            t0 = time.monotonic()
            log.write(k="s", id=rid, t=t0)
            try:
                d = bus.request(event, deadline_ms=args.deadline_ms)
            except Exception as exc:  # counted as never returned; the log says why
                log.write(k="x", id=rid, t=t0, err=repr(exc)[:300])
                continue
            log.write(
                k="r",
                id=rid,
                t=t0,
                lat=(time.monotonic() - t0) * 1000,
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
