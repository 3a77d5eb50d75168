"""The soak's worst-day faults: a cluster master failover, Redis out of memory, a full disk,
a worker's clock stepped, and a backlog past the stream limit.

Each is a generator of steps like the faults in ``soak_faults.py`` and notes its
``window_s``: how long after its start the fault itself may excuse a degraded answer
(``soak_report`` counts degraded answers inside and outside these windows). The cluster
failover runs on a cluster of its own (3 masters + 3 replicas, ``HOOKBUS_PARTITIONS=3``)
with a chain worker and a producer of its own, logged as the ``cluster`` producer, since the
rest of the soak's fleet runs on one server (RQ does not support Cluster).
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import redis
from soak_fleet import end_process
from soak_producer import Log, sched_since, thread_sched

if TYPE_CHECKING:
    from soak_faults import Ctx

Steps = Generator[float, None, None]

#: The kinds this module adds.
KINDS = ("master_failover", "redis_oom", "disk_full", "clock_step", "backlog_overflow")
#: How long Redis refuses writes in the OOM and disk-full faults, in s.
REFUSAL_S = 4.0
#: How long the fan-out dispatcher is stopped in the backlog fault, and how long its drain
#: afterwards counts as the fault's, in s.
BACKLOG_STOP_S = 12.0
BACKLOG_DRAIN_S = 8.0
#: The clock steps of the clock fault (seconds of skew) and how long each lasts, in s.
CLOCK_STEPS = (45.0, -45.0)
CLOCK_STEP_S = 8.0
#: The slot whose wall clock the clock fault steps (see ``soak_clock.py``).
CLOCK_SLOT = "chain-2"
#: After the promotion, how long the failover's producer goes on, in s, and the time the
#: fault allows for recovery after the promotion (issue 24: within 5 s).
AFTER_PROMOTION_S = 10.0
RECOVERY_S = 5.0
#: The failover producer's rate (requests/s) and deadline (ms).
CLUSTER_RATE, CLUSTER_DEADLINE_MS = 20.0, 250


def make(ctx: Ctx, kind: str) -> Steps:
    if kind == "master_failover":
        return master_failover(ctx)
    if kind == "redis_oom":
        return refuse_writes(ctx, "OOM")
    if kind == "disk_full":
        return refuse_writes(ctx, "MISCONF")
    if kind == "clock_step":
        return clock_step(ctx)
    if kind == "backlog_overflow":
        return backlog_overflow(ctx)
    raise ValueError(f"unknown fault kind {kind!r}")


def refuse_writes(ctx: Ctx, refusal: str) -> Steps:
    """Redis refuses writes for :data:`REFUSAL_S`: ``OOM`` (maxmemory set to what it holds,
    noeviction) or ``MISCONF`` (an RDB save that fails, its folder gone, with
    stop-writes-on-bgsave-error on: what a full disk does)."""
    kind = "redis_oom" if refusal == "OOM" else "disk_full"
    ctx.note(kind, seconds=REFUSAL_S, window_s=REFUSAL_S + 2.0)
    client = redis.Redis.from_url(ctx.redis.url, socket_timeout=5, protocol=2)
    gone = ctx.run_dir / "redis" / f"gone-{len(ctx.record)}"
    try:
        if refusal == "OOM":
            used = int(client.info("memory")["used_memory"])
            client.config_set("maxmemory-policy", "noeviction")
            client.config_set("maxmemory", str(max(1, used - 1_000_000)))
        else:
            gone.mkdir(parents=True, exist_ok=True)
            client.config_set("save", "3600 1")
            client.config_set("stop-writes-on-bgsave-error", "yes")
            client.config_set("dir", str(gone))
            gone.rmdir()
            client.bgsave()
        yield REFUSAL_S
    finally:
        if refusal == "OOM":
            client.config_set("maxmemory", "0")
        else:
            client.config_set("dir", str(ctx.redis.folder))
            client.config_set("save", "")
            client.bgsave()
        client.close()


def clock_step(ctx: Ctx) -> Steps:
    """Step the wall clock of one chain worker (45 s ahead, then 45 s behind, then right):
    it must stay alive for the producers and keep answering."""
    skew_file = clock_file(ctx.run_dir)
    total = CLOCK_STEP_S * len(CLOCK_STEPS)
    ctx.note("clock_step", slot=CLOCK_SLOT, steps_s=list(CLOCK_STEPS), window_s=1.0)
    record = ctx.record[-1]
    try:
        for skew in CLOCK_STEPS:
            skew_file.write_text(str(skew))
            yield CLOCK_STEP_S
    finally:
        skew_file.write_text("0")
    record["seconds"] = total


def clock_file(run_dir: Path) -> Path:
    """The file ``soak_clock.py`` reads the clock slot's skew from."""
    return run_dir / "clock-skew.txt"


def backlog_overflow(ctx: Ctx) -> Steps:
    """Stop the fan-out dispatcher long enough for the event backlog to pass
    ``streams.events_maxlen``: the flood's publishes past it are refused (counted as
    publish errors, not lost), and once it runs again every accepted event runs once."""
    # its window covers the drain too: the dispatcher resumes with ~1,000 events at once and
    # the RQ workers' burst takes the CPU from the chain workers on a small host
    window = BACKLOG_STOP_S + BACKLOG_DRAIN_S
    ctx.note("backlog_overflow", slot="fanout-1", seconds=BACKLOG_STOP_S, window_s=window)
    ctx.fleet.signal("fanout-1", signal.SIGSTOP, hold=True)
    try:
        yield BACKLOG_STOP_S
    finally:
        ctx.fleet.signal("fanout-1", signal.SIGCONT, hold=False)


def master_failover(ctx: Ctx) -> Steps:
    """SIGKILL the master holding ``{ns}`` of a 3+3 cluster under a producer's load."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.cluster_fixture import LocalCluster, namespace_spread

    ctx.note("master_failover", window_s=60.0)
    record = ctx.record[-1]
    # a fresh folder each time: nodes started on the last run's nodes.conf refuse to join
    folder = Path(tempfile.mkdtemp(prefix="cluster-", dir=ctx.run_dir))
    cluster = LocalCluster(folder, 3, replicas=1)
    worker: subprocess.Popen[bytes] | None = None
    stop = threading.Event()
    sender: threading.Thread | None = None
    try:
        started = time.monotonic()
        cluster.start()
        ns = namespace_spread(cluster.url, 3, prefix="soak")
        env = {**ctx.env, "HOOKBUS_REDIS_URL": cluster.url, "HOOKBUS_NAMESPACE": ns}
        env["HOOKBUS_PARTITIONS"] = "3"
        log = open(ctx.run_dir / "logs" / "cluster-chain.log", "ab")  # noqa: SIM115
        args = [sys.executable, "-m", "hookbus", "worker", "--role", "chain"]
        worker = subprocess.Popen(
            [*args, "--hooks-dir", str(ctx.hooks_dir)],
            env=env,
            cwd=ctx.run_dir,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        for _ in range(600):  # the worker up: its heartbeat, within 60 s
            if _chain_alive(cluster.url, ns):
                break
            yield 0.1
        out = Log((ctx.run_dir / "producers" / "cluster.jsonl").open("a", encoding="utf-8"))
        sender = threading.Thread(target=_send, args=(cluster.url, ns, out, stop), daemon=True)
        sender.start()
        yield 3.0
        from hookbus.bus.keys import workers

        own = workers(ns)
        victim = cluster.master_port(own)
        cluster.kill(victim)
        killed = time.monotonic()
        record.update(killed_t=round(killed - ctx.t0, 2), setup_s=round(killed - started, 1))
        while True:
            with contextlib.suppress(RuntimeError):
                if cluster.master_port(own) != victim:
                    break
            if time.monotonic() - killed > 30:
                record["promoted_s"] = None
                return
            yield 0.05
        promoted = time.monotonic() - killed
        # excused: the setup (the cluster and its worker starting) and the failover, up to
        # RECOVERY_S after the promotion
        window = killed - started + promoted + RECOVERY_S
        record.update(promoted_s=round(promoted, 2), window_s=round(window, 2))
        yield AFTER_PROMOTION_S
        record["worker_restarted"] = worker.poll() is not None
    finally:
        stop.set()
        if sender is not None:
            sender.join(10)
        end_process(worker)
        cluster.stop()


def _chain_alive(url: str, ns: str) -> bool:
    """Whether a chain worker of ``ns`` heartbeats on the cluster at ``url``."""
    from hookbus.bus.connection import bus_client
    from hookbus.bus.keys import Keys
    from hookbus.bus.settings.loader import load_settings
    from hookbus.workers.fleet.heartbeat import alive_workers

    settings = load_settings(overrides={"redis_url": url, "namespace": ns}).settings
    try:
        client = bus_client(settings)
        return bool(alive_workers(client, Keys.for_namespace(ns), dead_after_ms=5_000))
    except Exception:  # the cluster still starting: not yet
        return False


def _send(url: str, ns: str, log: Log, stop: threading.Event) -> None:
    """The failover's producer: sync requests at :data:`CLUSTER_RATE` over sessions of
    every partition, logged as the soak's producers log theirs."""
    from hookbus import HookBus
    from hookbus.bus.settings.loader import load_settings
    from hookbus.bus.wire import Event

    overrides = {"redis_url": url, "namespace": ns, "partitions": 3}
    bus = HookBus(load_settings(overrides=overrides).settings)
    i = 0
    start = time.monotonic()
    try:
        while not stop.wait(max(0.0, start + i / CLUSTER_RATE - time.monotonic())):
            rid = f"cluster-{i}"
            event = Event(
                kind="PreToolUse",
                session_id=f"s{i % 9}",
                payload={"tool_name": "Read", "tool_input": {"path": uuid.uuid4().hex}},
            )
            i += 1
            log.write(k="s", id=rid, t=time.monotonic())
            sched = thread_sched()
            t0 = time.monotonic()
            try:
                d = bus.request(event, deadline_ms=CLUSTER_DEADLINE_MS)
            except Exception as exc:
                log.write(k="x", id=rid, t=t0, err=repr(exc)[:300])
                continue
            lat = (time.monotonic() - t0) * 1000
            fields: dict[str, Any] = {"lat": lat, **sched_since(sched)}
            log.write(
                k="r", id=rid, t=t0, dl=CLUSTER_DEADLINE_MS, deg=bool(d.degraded),
                out=d.outcome, why=(d.reason or "")[:160], w=d.worker, **fields,
            )  # fmt: skip
    finally:
        bus.close()
