"""Soak test: a real hookbus fleet under steady load while faults are injected on a schedule.

Run: ``python benchmarks/soak.py --duration 300 --report soak.json [--png soak.png]``

It starts its own redis-server (AOF on, a free loopback port, a temporary folder), writes
and pushes its own hooks folder (``soak_hooks.py``), runs 2 chain workers, a fan-out
dispatcher and 2 RQ workers (``hookbus worker --role ...``), several producer processes at
a fixed blocking rate and a non-blocking flood (``soak_producer.py``), and injects faults
(``soak_faults.py``): SIGKILL + restart of each role, SIGSTOP/SIGCONT of a chain worker,
a Redis restart and a 2 s Redis stall, a reload, crashing and hanging hooks, a poison
payload, producers with skewed clocks (+30 s and -30 s), and three more from issue 12's
table: an Event object re-asked after a late reply, a hook holding the GIL ~0.4 s, a storm
of 600 hanging requests (``--faults`` picks kinds; the default is all, spread over 10-75 %
of the run, twice from 400 s on). After the load it lets the fleet drain, counts
(``soak_report.py``), writes the JSON report, prints one screen and draws a PNG.

The report's keys: ``blocking.sent|answered|degraded|late|lost``, ``events.published|
expected_runs|runs|lost|doubled|dead_lettered``, ``faults`` (kinds injected), ``memory``
(RSS per process, children included, at start and end; unexpected exits) and ``streams``
(lengths, pending); besides them, ``blocking.late_starved`` (late answers while the host did
not run the calling process, measured by each process's lag watcher: not in
``blocking.late``) and ``blocking.late_calls`` (the late calls of both kinds, with the
evidence).
Exit status: 0, or 1 with ``--check`` when late, lost, events lost or doubled is non-zero.
Everything it starts is ended on the way out (also on Ctrl-C and errors); every loop is
bounded in count and time. Processes' logs stay in the run folder (``--run-dir``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))

import soak_faults
import soak_report
import soak_state
import soak_worst
from soak_fleet import (
    Fleet,
    RedisServer,
    end_process,
    rss_kb,
    spawn,
    tree_rss_kb,
    worker_env,
)
from soak_hooks import write_hooks
from soak_producer import Log, watch_lag

NAMESPACE = "soak"
#: How long the fleet gets to send its first heartbeats, in seconds.
READY_TIMEOUT_S = 60.0
#: Loop tick of the harness, in seconds.
TICK_S = 0.05
PRODUCER_PY = str(Path(__file__).with_name("soak_producer.py"))


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--duration", type=float, required=True, help="seconds of load")
    p.add_argument("--report", type=Path, required=True, help="JSON report path")
    p.add_argument("--png", type=Path, help="latency plot (needs matplotlib)")
    p.add_argument("--run-dir", type=Path, help="keep logs here (default: a temp folder)")
    p.add_argument("--producers", type=int, default=3, help="blocking producer processes")
    p.add_argument("--rate", type=float, default=10.0, help="requests/s per producer")
    p.add_argument("--flood-rate", type=float, default=30.0, help="recorded events/s")
    p.add_argument("--deadline-ms", type=int, default=250)
    p.add_argument(
        "--events-maxlen", type=int, default=600,
        help="streams.events_maxlen of the run (the backlog fault stops the dispatcher past it)",
    )  # fmt: skip
    kinds = ",".join(soak_faults.ALL_FAULTS)
    p.add_argument("--faults", default=kinds, help=f"kinds, in order (default: {kinds})")
    p.add_argument("--drain-s", type=float, default=None, help="longest drain after the load")
    p.add_argument("--check", action="store_true", help="exit 1 when a promise was broken")
    p.add_argument("--redis-server", default=None, help="server binary (default: redis-server)")
    return p.parse_args(argv)


def server_binary() -> str:
    """redis-server from PATH, else the one hookbus's embedded extra ships (valkey)."""
    found = shutil.which("redis-server")
    if found:
        return found
    from hookbus.bus.embedded import find_server_binary

    return str(find_server_binary())


def push_hooks(env: dict[str, str], hooks_dir: Path, run_dir: Path) -> None:
    """The first bundle, pushed the way an operator does (``hookbus reload``)."""
    cmd = [sys.executable, "-m", "hookbus", "reload", "--dir", str(hooks_dir)]
    done = subprocess.run(cmd, env=env, cwd=run_dir, capture_output=True, timeout=120)
    if done.returncode != 0:  # the workers still load --hooks-dir; the run goes on
        tail = (done.stdout + done.stderr).decode(errors="replace").strip().splitlines()[-3:]
        print(f"warning: the first `hookbus reload` failed (exit {done.returncode}): {tail}")


def wait_ready(client: redis.Redis, fleet: Fleet) -> None:
    from hookbus.bus.keys import workers

    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        pids = set()
        for value in list(client.hvals(workers(NAMESPACE))):
            try:
                pids.add(json.loads(value).get("pid"))
            except ValueError:
                continue
        want = {fleet.pid(name) for name in fleet.slots}
        if want <= pids:
            return
        fleet.supervise()
        time.sleep(0.1)
    raise RuntimeError(f"workers sent no heartbeat within {READY_TIMEOUT_S:.0f} s; see logs/")


def start_producers(args: argparse.Namespace, url: str, env: dict[str, str], run_dir: Path
                    ) -> list[subprocess.Popen[bytes]]:  # fmt: skip
    common = ["--url", url, "--namespace", NAMESPACE, "--seconds", str(args.duration)]
    procs = []
    for i in range(1, args.producers + 1):
        out = run_dir / "producers" / f"p{i}.jsonl"
        cmd = [sys.executable, PRODUCER_PY, "--mode", "blocking", "--name", f"p{i}"]
        cmd += ["--out", str(out), "--rate", str(args.rate), "--deadline-ms", str(args.deadline_ms)]
        procs.append(spawn([*cmd, *common], env, run_dir))
    cmd = [sys.executable, PRODUCER_PY, "--mode", "flood", "--name", "flood"]
    cmd += ["--out", str(run_dir / "producers" / "flood.jsonl"), "--rate", str(args.flood_rate)]
    procs.append(spawn([*cmd, *common], env, run_dir))
    return procs


def _group(client: redis.Redis, stream: str) -> dict[str, Any]:
    """Each group's pending count, Redis's lag, and whether it has read up to the stream's
    last entry (``behind``): Redis 7.0's lag is wrong after a restart, the ids are not."""
    try:
        groups = client.xinfo_groups(stream)
        last = client.xinfo_stream(stream).get("last-generated-id")
    except redis.exceptions.ResponseError:
        return {}
    return {
        str(g["name"], "utf-8") if isinstance(g["name"], bytes) else g["name"]: {
            "pending": g.get("pending"),
            "lag": g.get("lag"),
            "behind": g.get("last-delivered-id") != last,
        }
        for g in groups
    }


def streams(client: redis.Redis) -> dict[str, Any]:
    """Lengths of the run's streams, their groups' pending/lag, and RQ's queue/registries."""
    from hookbus.bus import keys

    out: dict[str, Any] = {}
    for name, key in (
        ("requests", keys.requests(NAMESPACE)),
        ("events", keys.events(NAMESPACE)),
        ("decisions", keys.decisions(NAMESPACE)),
        ("dead_letters", keys.dead_letters(NAMESPACE)),
    ):
        out[f"{name}.len"] = client.xlen(key)
    out["requests.groups"] = _group(client, keys.requests(NAMESPACE))
    out["events.groups"] = _group(client, keys.events(NAMESPACE))
    q = keys.rq_queue_name(NAMESPACE)
    out["rq.queued"] = client.llen(f"rq:queue:{q}")
    for reg in ("wip", "scheduled", "failed"):
        out[f"rq.{reg}"] = client.zcard(f"rq:{reg}:{q}")
    return out


def dead_letter_split(client: redis.Redis) -> dict[str, int]:
    """Entries of the dead-letter stream by the stream they came from, and how many of
    them do not decode (poison)."""
    import msgspec

    from hookbus.bus import keys

    split = {"requests": 0, "events": 0, "undecodable": 0}
    entries: list[tuple[bytes, dict[bytes, bytes]]] = client.xrange(  # type: ignore[assignment]
        keys.dead_letters(NAMESPACE), count=100_000
    )
    for _, fields in entries:
        raw = fields.get(b"e")
        try:
            data = msgspec.msgpack.decode(raw) if raw is not None else None
        except (msgspec.DecodeError, RecursionError):
            data = None
        if not isinstance(data, dict):
            split["undecodable"] += 1
        if fields.get(b"stream") == keys.requests(NAMESPACE).encode():
            split["requests"] += 1
        else:
            split["events"] += 1
    return split


def drain(client: redis.Redis, fleet: Fleet, runs_file: Path, limit_s: float) -> float:
    """Wait (bounded) until the fan-out and RQ have nothing left; seconds waited."""
    began = time.monotonic()
    stable_since, last_size = time.monotonic(), -1
    waiting = ""
    while time.monotonic() - began < limit_s:
        fleet.supervise()
        try:
            s = streams(client)
        except redis.exceptions.RedisError:
            time.sleep(0.5)
            continue
        fanout = s["events.groups"].get("fanout", {})
        idle = (
            not fanout.get("pending")
            and not fanout.get("behind")
            and s["rq.queued"] == 0
            and s["rq.wip"] == 0
            and s["rq.scheduled"] == 0
        )
        size = runs_file.stat().st_size if runs_file.exists() else 0
        if size != last_size:
            stable_since, last_size = time.monotonic(), size
        if idle and time.monotonic() - stable_since >= 2.0:
            return time.monotonic() - began
        busy = {k: v for k, v in s.items() if k.startswith("rq.") and v and k != "rq.failed"}
        quiet = time.monotonic() - stable_since
        waiting = f"fan-out {fanout}, RQ {busy}, runs file unchanged for {quiet:.1f} s"
        time.sleep(0.25)
    print(f"drain gave up after {limit_s:.0f} s: {waiting}")
    return time.monotonic() - began


def run(args: argparse.Namespace, run_dir: Path) -> dict[str, Any]:
    for sub in ("logs", "producers", "runs"):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    server = RedisServer(run_dir / "redis", binary=args.redis_server or server_binary())
    t0 = time.monotonic()
    fleet: Fleet | None = None
    producers: list[subprocess.Popen[bytes]] = []
    ctx: soak_faults.Ctx | None = None
    fault_fh = (run_dir / "producers" / "fault.jsonl").open("a", encoding="utf-8")
    # the harness's own requests (faults) are logged as the "fault" producer: its lag too
    fault_log, lag_stop = Log(fault_fh), threading.Event()
    lag_thread = threading.Thread(
        target=watch_lag, args=(fault_log, lag_stop, args.duration + 300), daemon=True
    )
    try:
        server.start()
        hooks_dir = run_dir / "hooks"
        write_hooks(hooks_dir, run_dir / "runs")
        env = worker_env(server.url, NAMESPACE, run_dir)
        limits = {"HOOKBUS_STREAMS__EVENTS_MAXLEN": str(args.events_maxlen)}
        env.update(limits)
        push_hooks(env, hooks_dir, run_dir)
        fleet = Fleet(server.url, NAMESPACE, hooks_dir, run_dir, t0)
        fleet.env.update(limits)
        skew_file = soak_worst.clock_file(run_dir)
        skew_file.write_text("0")
        fleet.clock_slots[soak_worst.CLOCK_SLOT] = str(skew_file)
        fleet.add("chain", 2)
        fleet.add("fanout", 1)
        fleet.add("rq", 2)
        deps = soak_state.with_path(fleet.env, soak_state.dependency_dir(run_dir))
        fleet.slot_env[soak_state.HALF_SLOT] = {"PYTHONPATH": deps["PYTHONPATH"]}
        fleet.start_all()
        client = redis.Redis.from_url(server.url, socket_timeout=5, protocol=2)
        wait_ready(client, fleet)
        fleet.note_rss_start()
        redis_rss_start = rss_kb(server.pid)
        print(f"fleet ready on {server.url} in {time.monotonic() - t0:.1f} s; load starts")
        t_load = time.monotonic()
        fleet.t0 = t_load
        lag_thread.start()
        producers = start_producers(args, server.url, env, run_dir)
        ctx = soak_faults.Ctx(
            fleet=fleet, redis=server, namespace=NAMESPACE, hooks_dir=hooks_dir,
            run_dir=run_dir, t0=t_load, env=env, fault_log=fault_log,
            skew_window_s=max(5.0, min(20.0, 0.15 * args.duration)),
        )  # fmt: skip
        kinds = [k for k in args.faults.split(",") if k]
        plan = soak_faults.schedule(kinds, args.duration)
        active: list[tuple[float, soak_faults.Steps]] = []
        end = t_load + args.duration
        # producers' RSS: "start" once warm (5 s in), "end" a second before they stop
        producer_rss: dict[str, dict[str, int | None]] = {}
        rss_marks = [(min(5.0, args.duration / 2), "rss_start_kb")]
        rss_marks.append((args.duration - 1, "rss_end_kb"))
        while time.monotonic() < end or (active and time.monotonic() < end + 30):
            now = time.monotonic()
            while rss_marks and now - t_load >= rss_marks[0][0]:
                _, mark = rss_marks.pop(0)
                for i, proc in enumerate(producers):
                    name = f"producer-p{i + 1}" if i < args.producers else "producer-flood"
                    producer_rss.setdefault(name, {})[mark] = rss_kb(proc.pid)
            for line in fleet.supervise():
                print(f"  t={now - t_load:6.1f}s  {line}")
            while plan and now - t_load >= plan[0][0]:
                _, kind = plan.pop(0)
                print(f"  t={now - t_load:6.1f}s  fault: {kind}")
                active.append((now, soak_faults.make(ctx, kind, args.rate)))
            still = []
            for due, steps in active:
                if due > now:
                    still.append((due, steps))
                    continue
                with contextlib.suppress(StopIteration):
                    still.append((time.monotonic() + next(steps), steps))
            active = still
            time.sleep(TICK_S)
        for proc in producers + ctx.procs:  # they end on their own at --seconds
            try:
                proc.wait(max(1.0, end + 40 - time.monotonic()))
            except subprocess.TimeoutExpired:
                end_process(proc)
        for thread in ctx.threads:
            thread.join(10)
        lag_stop.set()
        load_s = time.monotonic() - t_load
        limit = args.drain_s if args.drain_s is not None else max(30.0, 0.3 * args.duration)
        drained = drain(client, fleet, run_dir / "runs" / "runs.jsonl", min(limit, 180.0))
        print(f"load ended after {load_s:.0f} s; drained in {drained:.1f} s")
        memory: dict[str, Any] = {}
        for name, slot in fleet.slots.items():
            memory[name] = {
                "rss_start_kb": slot.rss_start_kb,
                "rss_end_kb": tree_rss_kb(fleet.pid(name)),
                "restarts_by_fault": slot.restarts,
                "unexpected_exits": slot.unexpected_exits,
            }
        memory.update(producer_rss)
        memory["redis-server"] = {
            "rss_start_kb": redis_rss_start,
            "rss_end_kb": rss_kb(server.pid),
            "used_memory": client.info("memory").get("used_memory"),
        }
        stream_info = streams(client)
        dead = dead_letter_split(client)
        stream_info["dead_letters.split"] = dead
        logs = soak_report.load(run_dir)
        reloads = [(t_load + f["t"], f["generation"]) for f in ctx.record if f["kind"] == "reload"]
        blocking = soak_report.count_blocking(logs, reloads)
        windows = soak_report.fault_windows(ctx.record, t_load)
        degraded = soak_report.split_degraded(
            blocking["answers"], windows, blocking["stalls"], t_load
        )
        wipes = [
            (
                t_load + f["t"] - f.get("held_s", 0.0) - soak_state.WIPE_BACKLOG_S,
                t_load + f["t"] + f["down_s"],
            )
            for f in ctx.record
            if f["kind"] == "redis_wipe"
        ]
        events = soak_report.count_events(logs, run_dir / "runs", wipes)
        report: dict[str, Any] = {
            "blocking.sent": blocking["sent"],
            "blocking.answered": blocking["answered"],
            "blocking.degraded": blocking["degraded"],
            "blocking.degraded_inside": degraded["inside"],
            "blocking.degraded_outside": degraded["outside"],
            "blocking.degraded_outside_starved": degraded["outside_starved"],
            "blocking.degraded_windows": degraded,
            "blocking.late": blocking["late"],
            "blocking.lost": blocking["lost"],
            "blocking.late_starved": blocking["late_starved"],
            "blocking.late_calls": soak_report.late_calls(
                blocking["late_items"], blocking["late_starved_items"], t_load
            ),
            "events.published": events["published"],
            "events.publish_refused": events["publish_errors"],
            "events.expected_runs": events["expected_runs"],
            "events.runs": events["runs"],
            "events.lost": events["lost"],
            "events.wiped": events["wiped"],
            "events.doubled": events["doubled"],
            "events.dead_lettered": stream_info["rq.failed"] + dead["events"],
            "faults": sorted({f["kind"] for f in ctx.record}),
            "fault_record": ctx.record,
            "memory": memory,
            "streams": stream_info,
        }
        args.report.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        client.close()
        extra = {
            "duration_s": load_s,
            "run_dir": str(run_dir),
            "loadavg": os.getloadavg(),
            "fault_record": ctx.record,
            "t_load": t_load,
            "poison": [line for line in logs.get("fault", []) if line.get("k") == "poison"],
        }
        soak_report.print_report(report, blocking, events, extra)
        if args.png is not None:
            print(soak_report.draw(args.png, blocking, ctx.record, t_load, args.deadline_ms))
        print(f"report written to {args.report}")
        return report
    finally:
        for proc in producers + (ctx.procs if ctx is not None else []):
            end_process(proc)
        if fleet is not None:
            fleet.stop_all()
        server.stop()
        lag_stop.set()
        if lag_thread.is_alive():
            lag_thread.join(5)
        fault_fh.close()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    # SIGTERM cleans up like Ctrl-C; SIGINT too when a shell started us with it ignored
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="hookbus-soak-"))
    try:
        report = run(args, run_dir.resolve())
    except KeyboardInterrupt:
        print("interrupted: every process the soak started has been stopped", file=sys.stderr)
        return 130
    broken = [
        k
        for k in (
            "blocking.late",
            "blocking.lost",
            "blocking.degraded_outside",
            "events.lost",
            "events.doubled",
        )
        if report[k]
    ]
    broken += soak_state.broken(report["fault_record"])
    if args.check and broken:
        print(f"broken promises: {', '.join(broken)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
