"""Hook threads: the daemon pool that runs python hook calls which may be abandoned, and
the per-hook cap on abandoned calls (:mod:`hookbus.hooks.actions.python` uses them).

Python cannot stop a thread: a call abandoned at its timeout keeps its thread until the hook
returns. The pool has at most :data:`MAX_HOOK_THREADS` threads and each hook at most
:data:`HOOK_ABANDONED_CAP` abandoned calls still running, so one hanging hook cannot take the
threads every other hook needs.
"""

from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from hookbus.errors import HookBusy, HookExecutionError

__all__ = ["HOOK_ABANDONED_CAP", "MAX_HOOK_THREADS", "abandon", "hooks_at_cap", "start_call"]

#: Most daemon threads the isolated-call pool starts; past it, isolated calls fail fast
#: instead of piling up threads behind a hook that never returns.
MAX_HOOK_THREADS = 256

#: Most *abandoned* calls of one hook (their caller gave up at the timeout) that may still be
#: running on hook threads; past it the hook is not started (it fails as busy), so 16 hung
#: hooks are needed to take every thread, not one. Calls whose caller still waits are not
#: capped here: the worker's own concurrency bounds them (a burst must not be refused).
HOOK_ABANDONED_CAP = 16


class _Slots:
    """One hook's calls on hook threads: running (all), abandoned (still running, nobody
    waiting), refused for being at the cap (since this process started)."""

    __slots__ = ("abandoned", "cap", "refused", "running")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.running = 0
        self.abandoned = 0
        self.refused = 0


class _Call:
    """One call on a hook thread: its caller marks it abandoned at the timeout, the thread
    marks it done when the hook returns (under ``_slots_lock``)."""

    __slots__ = ("abandoned", "done", "slots")

    def __init__(self, slots: _Slots) -> None:
        self.slots = slots
        self.abandoned = False
        self.done = False


_slots_lock = threading.Lock()
#: by hook id: a reloaded hook's calls still running from its previous code count too
_slots: dict[str, _Slots] = {}


def hooks_at_cap() -> dict[str, dict[str, int]]:
    """Hooks whose abandoned calls fill their cap right now: ``{hook: {abandoned, running,
    cap, refused}}`` (refused: runs not started, since the process started). Heartbeats carry
    it as ``hooks_at_cap`` so ``hookbus status`` shows which hook is hanging."""
    with _slots_lock:
        return {
            hook_id: {
                "abandoned": s.abandoned,
                "running": s.running,
                "cap": s.cap,
                "refused": s.refused,
            }
            for hook_id, s in _slots.items()
            if s.abandoned >= s.cap
        }


def start_call(hook_id: str, cap: int | None, fn: Callable[[], Any]) -> tuple[Future[Any], _Call]:
    """Start ``fn`` on a hook thread unless ``hook_id`` has ``cap`` abandoned calls still
    running (then :class:`HookBusy`, a timeout: the hook's ``on_error`` answers)."""
    cap = HOOK_ABANDONED_CAP if cap is None else cap
    with _slots_lock:
        slots = _slots.get(hook_id)
        if slots is None:
            slots = _slots[hook_id] = _Slots(cap)
        slots.cap = cap
        if slots.abandoned >= cap:
            slots.refused += 1
            raise HookBusy(
                hook_id,
                f"not started: {slots.abandoned} of its calls abandoned after their timeout "
                f"are still running (its concurrency cap is {cap}); fix the hanging hook",
            )
        slots.running += 1
    call = _Call(slots)
    # the hook sees the caller's context variables (the request's fleet-state scope)
    context = contextvars.copy_context()

    def counted() -> Any:
        try:
            return context.run(fn)
        finally:
            with _slots_lock:
                call.done = True
                slots.running -= 1
                if call.abandoned:
                    slots.abandoned -= 1

    try:
        return _pool.submit(counted), call
    except HookExecutionError as exc:
        with _slots_lock:
            slots.running -= 1
        raise HookBusy(hook_id, exc.reason) from None


def abandon(call: _Call) -> None:
    """The caller gave up on ``call``: it counts against its hook's cap until it returns."""
    with _slots_lock:
        if not call.done and not call.abandoned:
            call.abandoned = True
            call.slots.abandoned += 1


# --- a pool of daemon threads, so an abandoned call never blocks interpreter exit ---------


class _DaemonPool:
    """Runs calls on daemon threads; grows when every thread is busy (a hung hook keeps
    its thread), idle threads wait for work. ``concurrent.futures`` threads are joined at
    exit, which would make one hung hook hang the process on shutdown."""

    def __init__(self) -> None:
        self._tasks: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._threads = 0

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            if self._idle == 0:
                if self._threads >= MAX_HOOK_THREADS:
                    raise HookExecutionError(
                        "-",
                        f"{self._threads} hook threads are busy (abandoned calls that "
                        "never returned, most likely): fix the hanging hook and restart "
                        "this worker",
                    )
                self._threads += 1
                threading.Thread(
                    target=self._work, name=f"hookbus-hook-{self._threads}", daemon=True
                ).start()
            else:
                self._idle -= 1
        self._tasks.put((fn, future))
        return future

    def _work(self) -> None:
        while True:
            fn, future = self._tasks.get()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except BaseException as exc:
                    future.set_exception(exc)
            del fn, future
            with self._lock:
                self._idle += 1


_pool = _DaemonPool()
