"""The fault schedule of a soak run: what each fault does, step by step, and when.

A fault is a generator: it acts, yields how many seconds to wait before its next step, and
returns when done, so the harness's one loop runs faults side by side with supervision and
never blocks on one (the longest single step is a Redis restart, about a second). Each
injected fault is appended to ``Ctx.record`` with its start time (seconds since t0).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import redis
import soak_state
import soak_worst
from soak_fleet import Fleet, RedisServer, run_reload, spawn
from soak_hooks import CRASH_TOOL, GIL_TOOL, HANG_TOOL, write_hooks
from soak_producer import Log, sched_since, thread_sched

Steps = Generator[float, None, None]

#: Every fault kind, in the order a full schedule injects them.
ALL_FAULTS = (
    "kill_chain",
    "stop_chain",
    "redis_stall",
    "reload",
    "crash_hook",
    "kill_fanout",
    "poison",
    "hang_hook",
    "kill_rq",
    "skewed_clock",
    "redis_restart",
    "reused_event",
    "gil_hook",
    "hang_storm",
    *soak_worst.KINDS,
    *soak_state.KINDS,
)
#: Hung requests the hang storm sends (more than two workers' 256 hook threads each).
STORM_REQUESTS = 600
#: Threads sending the storm (its calls are counted apart: they compete for this
#: process's GIL, so their latencies say little about the bus).
STORM_THREADS = 16
#: Nesting depth of the poison payload (the depth that raised RecursionError in issue 12).
POISON_DEPTH = 10_000
#: Deadline of the harness's own fault requests, in ms.
FAULT_DEADLINE_MS = 250
_MARK = "@@SOAKPOISON@@"


@dataclass
class Ctx:
    """What faults act on, and where they write what they did."""

    fleet: Fleet
    redis: RedisServer
    namespace: str
    hooks_dir: Path
    run_dir: Path
    t0: float
    env: dict[str, str]
    fault_log: Log
    skew_window_s: float
    generation: int = 1
    record: list[dict[str, Any]] = field(default_factory=list)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    threads: list[threading.Thread] = field(default_factory=list)

    def note(self, kind: str, **detail: Any) -> None:
        self.record.append({"kind": kind, "t": round(time.monotonic() - self.t0, 2), **detail})

    def in_thread(self, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, daemon=True)
        thread.start()
        self.threads.append(thread)


def kill_and_restart(ctx: Ctx, kind: str, slot: str) -> Steps:
    ctx.note(kind, slot=slot, pid=ctx.fleet.pid(slot))
    ctx.fleet.signal(slot, signal.SIGKILL, hold=True)
    yield 1.0
    ctx.fleet.restart(slot)


def stop_chain(ctx: Ctx) -> Steps:
    ctx.note("stop_chain", slot="chain-2", pid=ctx.fleet.pid("chain-2"), seconds=3)
    ctx.fleet.signal("chain-2", signal.SIGSTOP, hold=True)
    yield 3.0
    ctx.fleet.signal("chain-2", signal.SIGCONT, hold=False)


def redis_stall(ctx: Ctx) -> Steps:
    ctx.note("redis_stall", seconds=2)
    ctx.redis.pause()
    yield 2.0
    ctx.redis.resume()


def redis_restart(ctx: Ctx) -> Steps:
    ctx.note("redis_restart")
    down = ctx.redis.restart()
    ctx.record[-1]["down_s"] = round(down, 2)
    yield 0.0


def reload(ctx: Ctx) -> Steps:
    ctx.generation += 1
    write_hooks(ctx.hooks_dir, ctx.run_dir / "runs", generation=ctx.generation)
    ctx.note("reload", generation=ctx.generation)
    entry = ctx.record[-1]
    entry["rc"] = yield from run_reload(
        ctx.hooks_dir, ctx.env, ctx.run_dir, "reload.log", ctx.procs
    )


def _logged_request(
    bus: Any, log: Log, event: Any, rid: str, deadline_ms: int, want: str | None = None
) -> None:
    """One blocking request through the SDK, logged like a producer's."""
    log.write(k="s", id=rid, t=time.monotonic())
    sched = thread_sched()
    t0 = time.monotonic()  # after the log write: the latency is the SDK call's own
    try:
        d = bus.request(event, deadline_ms=deadline_ms)
    except Exception as exc:
        log.write(k="x", id=rid, t=t0, err=repr(exc)[:300])
        return
    lat = (time.monotonic() - t0) * 1000
    log.write(
        k="r",
        id=rid,
        t=t0,
        lat=lat,
        **sched_since(sched),
        dl=deadline_ms,
        deg=bool(d.degraded),
        out=d.outcome,
        want=want,
        why=(d.reason or "")[:160],
        w=d.worker,
    )


def _sdk_request(ctx: Ctx, tool: str, tag: str, deadline_ms: int = FAULT_DEADLINE_MS) -> None:
    from hookbus import HookBus
    from hookbus.bus.wire import Event

    event = Event(kind="PreToolUse", payload={"tool_name": tool, "tool_input": {"command": tag}})
    with HookBus.from_url(ctx.redis.url, ctx.namespace) as bus:
        _logged_request(bus, ctx.fault_log, event, f"fault-{tag}", deadline_ms)


def _sdk_publish(ctx: Ctx, tool: str) -> None:
    from hookbus import HookBus
    from hookbus.bus.wire import Event

    event = Event(kind="PostToolUse", payload={"tool_name": tool})
    with HookBus.from_url(ctx.redis.url, ctx.namespace) as bus:
        t0 = time.monotonic()
        try:
            bus.publish(event)
        except Exception as exc:
            ctx.fault_log.write(k="pe", t=t0, n=1, err=repr(exc)[:300])
            return
        ctx.fault_log.write(k="p", t=t0, e=event.id, tool=tool)


def bad_hook(ctx: Ctx, kind: str, tool: str) -> Steps:
    ctx.note(kind, tool=tool)
    tag = f"{kind}-{len(ctx.record)}"
    ctx.in_thread(lambda: _sdk_request(ctx, tool, tag))
    ctx.in_thread(lambda: _sdk_publish(ctx, tool))
    yield 0.0


def _nested(depth: int) -> bytes:
    """msgpack of {"a": {"a": ... nil}} ``depth`` deep, built without recursion."""
    return b"\x81\xa1a" * depth + b"\xc0"


def _poison_bytes(event: Any, extra: dict[str, Any]) -> bytes:
    from hookbus.bus.wire import encode

    fields = {k: v for k, v in extra.items() if k in type(event).__struct_fields__}
    data: bytes = encode(msgspec.structs.replace(event, **fields))
    mark = msgspec.msgpack.encode(_MARK)
    return data.replace(mark, _nested(POISON_DEPTH))


def _inject_poison(ctx: Ctx) -> None:
    """Raw XADDs (a hostile producer bypasses the SDK) of a request and an event whose
    payload nests 10,000 deep, then the same through the SDK (it should refuse them)."""
    from hookbus import HookBus
    from hookbus.bus import keys
    from hookbus.bus.wire import Event, decode, new_id, now_ms

    client = redis.Redis.from_url(ctx.redis.url, socket_timeout=5, protocol=2)
    result: dict[str, Any] = {}
    try:
        rid = new_id()
        request = Event(kind="PreToolUse", payload={"tool_name": "Bash", "x": _MARK})
        extra = {
            "deadline": now_ms() + 1000,
            "budget_ms": 1000,
            "request_id": rid,
            "reply_to": keys.reply(ctx.namespace, rid),
        }
        if "request_id" not in type(request).__struct_fields__:
            extra["reply_to"] = keys.reply(ctx.namespace, request.id)
        client.xadd(keys.requests(ctx.namespace), {b"e": _poison_bytes(request, extra)})
        popped: Any = client.blpop([str(extra["reply_to"])], timeout=2)
        if popped is None:
            result["raw_request"] = "no reply within 2 s"
        else:
            from hookbus.bus.wire import Decision

            d = decode(popped[1], Decision)
            result["raw_request"] = f"{d.outcome} degraded={d.degraded} {d.reason or ''}"[:200]
        event = Event(kind="PostToolUse", payload={"tool_name": "Read", "x": _MARK})
        client.xadd(keys.events(ctx.namespace), {b"e": _poison_bytes(event, {})})
        result["raw_event"] = "added"
    except Exception as exc:
        result["raw_error"] = repr(exc)[:200]
    finally:
        client.close()
    deep: dict[str, Any] = {}
    inner = deep
    for _ in range(POISON_DEPTH):
        inner["a"] = {}
        inner = inner["a"]
    with HookBus.from_url(ctx.redis.url, ctx.namespace) as bus:
        for name, call in (
            ("sdk_request", lambda: bus.request(Event(kind="PreToolUse", payload=deep))),
            ("sdk_publish", lambda: bus.publish(Event(kind="PostToolUse", payload=deep))),
        ):
            try:
                out = call()
                result[name] = f"accepted: {out!r}"[:200]
            except Exception as exc:
                result[name] = f"raised {type(exc).__name__}: {exc}"[:200]
    ctx.fault_log.write(k="poison", t=time.monotonic(), **result)


def poison(ctx: Ctx) -> Steps:
    ctx.note("poison", depth=POISON_DEPTH)
    ctx.in_thread(lambda: _inject_poison(ctx))
    yield 0.0


def skewed_clock(ctx: Ctx, rate: float) -> Steps:
    """Two producers whose clocks are 30 s ahead and 30 s behind, for a window."""
    ctx.note("skewed_clock", skew_s=[30, -30], seconds=ctx.skew_window_s)
    for skew in (30, -30):
        name = f"skew{'+' if skew > 0 else '-'}{abs(skew)}"
        args = [
            sys.executable, str(Path(__file__).with_name("soak_producer.py")),
            "--mode", "blocking", "--url", ctx.redis.url, "--namespace", ctx.namespace,
            "--name", name, "--out", str(ctx.run_dir / "producers" / f"{name}.jsonl"),
            "--rate", str(rate), "--seconds", str(ctx.skew_window_s), "--threads", "2",
            "--skew-s", str(skew),
        ]  # fmt: skip
        ctx.procs.append(spawn(args, ctx.env, ctx.run_dir))
    yield 0.0


def _reuse(ctx: Ctx, tag: str) -> None:
    from hookbus import HookBus
    from hookbus.bus.wire import Event

    event = Event(kind="PreToolUse", payload={"tool_name": GIL_TOOL})
    with HookBus.from_url(ctx.redis.url, ctx.namespace) as bus:
        _logged_request(bus, ctx.fault_log, event, f"{tag}-a", FAULT_DEADLINE_MS)
        event.payload = {"tool_name": "Bash", "tool_input": {"command": "SOAK-DENY reuse"}}
        _logged_request(bus, ctx.fault_log, event, f"{tag}-b", 1000, want="deny")


def reused_event(ctx: Ctx) -> Steps:
    """An SDK user re-asks with the same Event object after a timeout, with a new question:
    the first call's late allow (its hook holds the GIL past the deadline, so the worker
    cannot answer in time) must not answer the second (which the guard denies)."""
    ctx.note("reused_event")
    tag = f"reuse-{len(ctx.record)}"
    ctx.in_thread(lambda: _reuse(ctx, tag))
    yield 0.0


def gil_hook(ctx: Ctx) -> Steps:
    """Five requests (1 s deadline), 1 s apart, whose hook holds the GIL about 0.4 s each
    (one at a time: two at once burn both cores of a small host and starve everyone)."""
    ctx.note("gil_hook", requests=5)
    for i in range(5):
        tag = f"gil-{len(ctx.record)}-{i}"
        ctx.in_thread(lambda tag=tag: _sdk_request(ctx, GIL_TOOL, tag, 1000))  # type: ignore[misc]
        yield 1.0


def _storm(ctx: Ctx, log: Log) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from hookbus import HookBus
    from hookbus.bus.wire import Event

    def one(i: int) -> None:
        payload = {"tool_name": HANG_TOOL, "tool_input": {"command": f"storm {i}"}}
        event = Event(kind="PreToolUse", payload=payload)
        _logged_request(bus, log, event, f"storm-{i}", FAULT_DEADLINE_MS)

    with (
        HookBus.from_url(ctx.redis.url, ctx.namespace) as bus,
        ThreadPoolExecutor(STORM_THREADS) as pool,
    ):
        list(pool.map(one, range(STORM_REQUESTS)))


def hang_storm(ctx: Ctx) -> Steps:
    """600 requests whose hook hangs 30 s: more than the chain workers' hook threads; the
    producers' guard answers (every 10th request is a deny) must stay right meanwhile."""
    ctx.note("hang_storm", requests=STORM_REQUESTS)
    log = Log((ctx.run_dir / "producers" / "storm.jsonl").open("a", encoding="utf-8"))
    ctx.in_thread(lambda: _storm(ctx, log))
    yield 0.0


def make(ctx: Ctx, kind: str, skew_rate: float) -> Steps:
    """The steps of one fault kind."""
    if kind == "kill_chain":
        return kill_and_restart(ctx, kind, "chain-1")
    if kind == "kill_fanout":
        return kill_and_restart(ctx, kind, "fanout-1")
    if kind == "kill_rq":
        return kill_and_restart(ctx, kind, "rq-1")
    if kind == "stop_chain":
        return stop_chain(ctx)
    if kind == "redis_stall":
        return redis_stall(ctx)
    if kind == "redis_restart":
        return redis_restart(ctx)
    if kind == "reload":
        return reload(ctx)
    if kind == "crash_hook":
        return bad_hook(ctx, kind, CRASH_TOOL)
    if kind == "hang_hook":
        return bad_hook(ctx, kind, HANG_TOOL)
    if kind == "poison":
        return poison(ctx)
    if kind == "skewed_clock":
        return skewed_clock(ctx, skew_rate)
    if kind == "reused_event":
        return reused_event(ctx)
    if kind == "gil_hook":
        return gil_hook(ctx)
    if kind == "hang_storm":
        return hang_storm(ctx)
    if kind in soak_worst.KINDS:
        return soak_worst.make(ctx, kind)
    if kind in soak_state.KINDS:
        return soak_state.make(ctx, kind)
    raise ValueError(f"unknown fault kind {kind!r}; known: {', '.join(ALL_FAULTS)}")


def schedule(kinds: list[str], duration_s: float) -> list[tuple[float, str]]:
    """Fault start times, spread evenly over 10 %-75 % of the run (the rest is recovery).
    Runs of 400 s or more go through the list again."""
    rounds = max(1, int(duration_s // 400) + 1) if duration_s >= 400 else 1
    todo = kinds * rounds
    if not todo:
        return []
    first, last = 0.10 * duration_s, 0.75 * duration_s
    step = (last - first) / max(1, len(todo) - 1)
    return [(first + i * step, kind) for i, kind in enumerate(todo)]
