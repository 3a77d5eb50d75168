"""Soak faults of the fleet's own state: Redis restarted with nothing kept, and a reload that
one chain worker cannot load.

* ``redis_wipe``: redis-server is killed, its AOF and RDB removed, and it starts again empty
  on the same port, as after a failover to an empty replica or a pod whose Redis keeps
  nothing. The workers must seed again what they hold (bundle, stamp, guarded kinds) with
  no operator; guarded requests meanwhile are denied, flagged degraded. What Redis held at
  that moment (events not yet run, jobs queued, reply lists) is gone with it. Just before
  the kill the fault reads how old the oldest unfinished event is (``held_s``: the event
  log's first entry not acknowledged by the fan-out group, the oldest RQ job queued,
  running or waiting for a retry); the report counts the runs of events published since
  then, or while Redis was down, apart (``events.wiped``), never as lost.
* ``half_reload``: a reload adds a hook whose module imports a package only ``chain-2`` can
  import (its ``PYTHONPATH`` has it; ``chain-1``'s has not). ``hookbus reload --wait`` must
  exit non-zero; ``chain-1`` keeps serving its last complete set, so no answer changes. A
  second reload then takes the hook out again, and every worker converges.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import redis
from soak_fleet import run_reload
from soak_hooks import write_hooks

if TYPE_CHECKING:
    from soak_faults import Ctx

Steps = Generator[float, None, None]

KINDS = ("redis_wipe", "half_reload")
#: The slot that can import the half-loadable hook's dependency.
HALF_SLOT = "chain-2"
#: The hook the half reload adds, and the package only ``HALF_SLOT`` can import.
HALF_HOOK = "soak-half"
HALF_PACKAGE = "soak_half_dep"
#: The tool the half hook matches (no request names it: its loading is what is tested).
HALF_TOOL = "SoakHalf"
#: Added to what Redis held at a wipe (``held_s``): an event published as its age was read.
WIPE_BACKLOG_S = 1.0
#: The wipe's window: the workers notice Redis back and seed it again.
WIPE_WINDOW_S = 6.0


def dependency_dir(run_dir: Path) -> Path:
    """The folder on ``HALF_SLOT``'s PYTHONPATH (and the reload command's) holding the
    package the half hook imports."""
    folder = run_dir / "only-chain-2"
    (folder / HALF_PACKAGE).mkdir(parents=True, exist_ok=True)
    (folder / HALF_PACKAGE / "__init__.py").write_text("READY = True\n", encoding="utf-8")
    return folder


def with_path(env: dict[str, str], folder: Path) -> dict[str, str]:
    paths = [str(folder), *filter(None, [env.get("PYTHONPATH")])]
    return {**env, "PYTHONPATH": ":".join(paths)}


def write_half_hook(hooks_dir: Path) -> None:
    folder = hooks_dir / HALF_HOOK
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "HOOK.toml").write_text(
        f'name = "{HALF_HOOK}"\n'
        'description = "soak harness hook that one chain worker cannot import"\n'
        'events = ["PreToolUse"]\npriority = 40\n\n'
        f'[match]\ntools = ["{HALF_TOOL}"]\n\n'
        '[action.python]\nentrypoint = "half:check"\ntimeout_secs = 1\n',
        encoding="utf-8",
    )
    (folder / "half.py").write_text(
        f"import {HALF_PACKAGE}\n\n\ndef check(event):\n    return None\n", encoding="utf-8"
    )


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _stream_ms(entry_id: bytes | str) -> int:
    return int(_text(entry_id).split("-", 1)[0])


def held_for_s(url: str, namespace: str) -> float:
    """How long ago the oldest event Redis still holds unfinished was published, in s: the
    first entry of the event log the fan-out group has not acknowledged, or the oldest RQ
    job queued, running or waiting for a retry. 0 when Redis holds nothing unfinished."""
    from datetime import datetime

    from hookbus.bus.keys import FANOUT_GROUP, Keys

    keys = Keys.for_namespace(namespace)
    client = redis.Redis.from_url(url, socket_timeout=2, protocol=2)
    try:
        seconds, micros = client.time()
        now_ms = seconds * 1000 + micros // 1000
        oldest: list[int] = []
        for group in client.xinfo_groups(keys.events):  # type: ignore[union-attr]
            if group["name"] in (FANOUT_GROUP, FANOUT_GROUP.encode()):
                later = client.xrange(keys.events, "(" + _text(group["last-delivered-id"]), count=1)
                oldest += [_stream_ms(later[0][0])] if later else []
        pending: Any = client.xpending(keys.events, FANOUT_GROUP)
        if pending.get("min"):
            oldest.append(_stream_ms(pending["min"]))
        queue = keys.rq_queue
        jobs = [*client.lrange(f"rq:queue:{queue}", 0, -1)]
        jobs += [
            *client.zrange(f"rq:wip:{queue}", 0, -1),
            *client.zrange(f"rq:scheduled:{queue}", 0, -1),
        ]
        for job in jobs:
            created = client.hget(f"rq:job:{_text(job).split(':')[0]}", "created_at")
            if created:
                stamp = datetime.fromisoformat(_text(created).replace("Z", "+00:00"))
                oldest.append(int(stamp.timestamp() * 1000))
    except redis.exceptions.RedisError:
        return 0.0
    finally:
        client.close()
    return max(0.0, (now_ms - min(oldest)) / 1000) if oldest else 0.0


def redis_wipe(ctx: Ctx) -> Steps:
    ctx.note("redis_wipe")
    entry = ctx.record[-1]
    entry["held_s"] = round(held_for_s(ctx.redis.url, ctx.namespace), 2)
    down = ctx.redis.wipe()
    entry["down_s"] = round(down, 2)
    entry["window_s"] = WIPE_WINDOW_S + down
    yield 0.0


def _reload(ctx: Ctx, entry: dict[str, Any], tag: str) -> Steps:
    """``hookbus reload --wait 10`` from a shell that can import the half hook's package;
    its exit code goes into the fault's record as ``rc_<tag>``."""
    env = with_path(ctx.env, dependency_dir(ctx.run_dir))
    log_name = f"reload-{tag}.log"
    entry[f"rc_{tag}"] = yield from run_reload(ctx.hooks_dir, env, ctx.run_dir, log_name, ctx.procs)


def half_reload(ctx: Ctx) -> Steps:
    ctx.note("half_reload", slot_without="chain-1", hook=HALF_HOOK)
    entry = ctx.record[-1]  # other faults may note theirs while this one runs
    write_half_hook(ctx.hooks_dir)
    yield from _reload(ctx, entry, "half")
    shutil.rmtree(ctx.hooks_dir / HALF_HOOK)
    write_hooks(ctx.hooks_dir, ctx.run_dir / "runs", generation=ctx.generation)
    yield from _reload(ctx, entry, "whole")
    entry["window_s"] = round(time.monotonic() - ctx.t0 - entry["t"], 2)


def make(ctx: Ctx, kind: str) -> Steps:
    if kind == "redis_wipe":
        return redis_wipe(ctx)
    if kind == "half_reload":
        return half_reload(ctx)
    raise ValueError(f"unknown fault kind {kind!r}")


def broken(record: list[dict[str, Any]]) -> list[str]:
    """What these faults saw that breaks a promise: a half-loaded reload that said success,
    or a whole one that did not."""
    out = []
    for fault in record:
        if fault["kind"] == "half_reload":
            if fault.get("rc_half") == 0:
                out.append(f"half_reload at t={fault['t']}s: reload --wait exited 0")
            if fault.get("rc_whole") != 0:
                out.append(
                    f"half_reload at t={fault['t']}s: the whole reload exited "
                    f"{fault.get('rc_whole')}"
                )
    return out
