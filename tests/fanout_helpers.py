"""Helpers of the fan-out integration tests and benchmark: recording hooks, worker processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from hookbus.bus.wire import Event, HookRun

#: The handler module every recording hook uses. It counts each (hook, event) it sees in
#: the hash $FANOUT_RECORD_KEY, so a hook run twice on one event shows as a count of 2.
HANDLER = textwrap.dedent(
    '''
    import os
    import time

    import redis

    _client = None


    def _redis():
        global _client
        if _client is None:
            _client = redis.Redis.from_url(os.environ["FANOUT_RECORD_URL"])
        return _client


    def _record(hook, event):
        events = event if isinstance(event, list) else [event]
        key = os.environ["FANOUT_RECORD_KEY"]
        pipe = _redis().pipeline(transaction=False)
        for e in events:
            pipe.hincrby(key, f"{hook}|{e.id}", 1)
        pipe.hincrby(key + ":jobs", hook, 1)
        pipe.execute()


    def make(hook):
        def handler(event):
            _record(hook, event)
        return handler


    def failing(event):
        """Fails until the flag $FANOUT_RECORD_KEY:heal is set."""
        key = os.environ["FANOUT_RECORD_KEY"]
        _redis().hincrby(key + ":tries", "flaky", 1)
        if not _redis().exists(key + ":heal"):
            raise RuntimeError("flaky hook failed on purpose")
        _record("flaky", event)


    def sleep_six(event):
        """Takes six seconds, longer than a running job's registry deadline without beats."""
        key = os.environ["FANOUT_RECORD_KEY"]
        _redis().hincrby(key + ":tries", "sleepy", 1)
        time.sleep(6)
        _record("sleepy", event)


    def picky(event):
        """Fails on every event whose payload says ``fail``; records the others."""
        key = os.environ["FANOUT_RECORD_KEY"]
        _redis().hincrby(key + ":tries", event.id, 1)
        if event.payload.get("fail"):
            raise RuntimeError(f"picky hook refuses event {event.payload.get('i')}")
        _record("picky", event)


    def dies_once(event):
        """Kills its own process the first time it meets an event whose payload says ``die``."""
        key = os.environ["FANOUT_RECORD_KEY"]
        if event.payload.get("die") and _redis().hsetnx(key + ":died", "once", 1):
            os.kill(os.getpid(), 9)
        _record("dies", event)


    def fails_then_dies(event):
        """Fails on an event whose payload says ``fail``; kills its own process the first
        time it meets one that says ``die``; records the others."""
        key = os.environ["FANOUT_RECORD_KEY"]
        _redis().hincrby(key + ":tries", event.id, 1)
        if event.payload.get("fail"):
            raise RuntimeError(f"fickle hook refuses event {event.payload.get('i')}")
        if event.payload.get("die") and _redis().hsetnx(key + ":died", "once", 1):
            os.kill(os.getpid(), 9)
        _record("fickle", event)


    def poison(event):
        """Kills its own process on every event whose payload says ``poison``."""
        key = os.environ["FANOUT_RECORD_KEY"]
        _redis().hincrby(key + ":tries", event.id, 1)
        if event.payload.get("poison"):
            os.kill(os.getpid(), 9)
        _record("poison", event)


    def steady(event):
        """20 ms per event; 3 s on one whose payload says ``slow``, announced first in
        $FANOUT_RECORD_KEY:at so a test can kill its worker in the middle of it."""
        key = os.environ["FANOUT_RECORD_KEY"]
        if event.payload.get("slow"):
            _redis().set(key + ":at", event.id)
            time.sleep(3)
        else:
            time.sleep(0.02)
        _record("steady", event)


    def slow_first(event):
        """The first run hangs (the test kills its worker); later runs return at once."""
        key = os.environ["FANOUT_RECORD_KEY"]
        runs = _redis().hincrby(key + ":tries", "slow", 1)
        if runs == 1:
            time.sleep(60)
        _record("slow", event)
    '''
)


def write_python_hook(
    root: Path,
    name: str,
    function: str,
    *,
    events: tuple[str, ...] = ("PostToolUse",),
    retries: tuple[int, list[int]] | None = None,
    batch: tuple[int, int] | None = None,
    timeout_s: float = 10.0,
) -> Path:
    """A python hook calling ``record_handler.<function>`` (``make_<name>`` for recorders)."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "record_handler.py").write_text(
        HANDLER + f"\n{name.replace('-', '_')} = make({name!r})\n"
    )
    entry = function if function != "record" else name.replace("-", "_")
    kinds = ", ".join(f'"{e}"' for e in events)
    text = (
        f'name = "{name}"\nevents = [{kinds}]\nblocking = false\n'
        f'[action.python]\nentrypoint = "record_handler:{entry}"\ntimeout_secs = {timeout_s}\n'
    )
    if retries is not None:
        text += f"[retries]\ncount = {retries[0]}\nintervals_s = {retries[1]}\n"
    if batch is not None:
        text += f"[batch]\nmax_events = {batch[0]}\nmax_wait_ms = {batch[1]}\n"
    (folder / "HOOK.toml").write_text(text)
    return folder


def worker_env(url: str, namespace: str, record_key: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env.update(
        {
            "HOOKBUS_REDIS_URL": url,
            "HOOKBUS_NAMESPACE": namespace,
            "FANOUT_RECORD_URL": url,
            "FANOUT_RECORD_KEY": record_key,
            # finished job records leave the shared test server soon (no dedupe relies on them)
            "HOOKBUS_RQ__RESULT_TTL_S": "60",
        }
    )
    return env


def spawn_worker(
    role: str, hooks_dir: Path, env: dict[str, str], *extra: str
) -> subprocess.Popen[bytes]:
    """``hookbus worker --role ROLE`` in its own process group."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hookbus",
            "--log-level",
            "WARNING",
            "worker",
            "--role",
            role,
            "--hooks-dir",
            str(hooks_dir),
            *extra,
        ],
        env=env,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def spawn_python(code: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", code], env=env, stdin=subprocess.DEVNULL, start_new_session=True
    )


def stop(proc: subprocess.Popen[bytes], *, timeout_s: float = 10.0) -> None:
    """SIGTERM, then SIGKILL the process group if it lingers."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        with suppress(subprocess.TimeoutExpired):
            proc.wait(timeout_s)
    if proc.poll() is None:
        kill(proc)


def kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process only (its children die with it by PR_SET_PDEATHSIG, if set)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)


@contextmanager
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """A list of processes that are all stopped at the end, whatever happens."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        yield procs
    finally:
        for proc in procs:
            stop(proc, timeout_s=5.0)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)


def wait_for(
    condition: Callable[[], bool],
    timeout_s: float,
    what: str,
    detail: Callable[[], object] | None = None,
) -> None:
    """Poll ``condition`` every 50 ms; fail with ``what`` (and ``detail()``, the state worth
    seeing) when it stays false."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if condition():
            return
        time.sleep(0.05)
    extra = f"; {detail()}" if detail is not None else ""
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}{extra}")


# --- a hook registry built in the test (unit tests) ----------------------------------


@dataclass(frozen=True)
class Retries:
    count: int = 0
    intervals_s: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Batch:
    max_events: int
    max_wait_ms: int


@dataclass(frozen=True)
class Hook:
    id: str
    events: tuple[str, ...]
    blocking: bool | None = None
    timeout_s: float | None = None
    retries: Retries = field(default_factory=Retries)
    batch: Batch | None = None
    enabled: bool = True


class StubRegistry:
    """Matches on kind only; runs hooks by calling the test's functions."""

    def __init__(self, hooks: Sequence[Hook], fns: dict[str, Any] | None = None) -> None:
        self._hooks = list(hooks)
        self.fns = fns or {}
        self.calls: list[tuple[str, Any]] = []

    def matching(self, event: Event) -> list[Hook]:
        return [h for h in self._hooks if event.kind in h.events and h.enabled]

    def hooks(self, kind: str | None = None) -> list[Hook]:
        return [h for h in self._hooks if kind is None or kind in h.events]

    def run_hook(self, hook_id: str, arg: Any, *, timeout_s: float | None = None) -> HookRun:
        self.calls.append((hook_id, arg))
        fn = self.fns.get(hook_id)
        if fn is not None:
            fn(arg)
        return HookRun(hook_id=hook_id, outcome="continue", duration_us=5)


def queued_events(client: redis.Redis, ns: str) -> int:
    """How many events the queued fan-out jobs of a namespace carry: a pack job holds
    several events of one hook, a single job one."""
    from rq import Queue

    from hookbus.bus.keys import rq_queue_name
    from hookbus.workers.fanout.serializer import MsgpackSerializer

    queue = Queue(rq_queue_name(ns), connection=client, serializer=MsgpackSerializer)
    return sum(len(job.meta.get("events") or [None]) for job in queue.jobs)
