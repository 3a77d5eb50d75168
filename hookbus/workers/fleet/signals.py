"""Signal handling for long-running commands (workers, `hookbus dev`), which cannot deadlock.

The first SIGTERM or SIGINT asks for a graceful stop; a second SIGINT exits at once.

A Python signal handler runs in the main thread between two bytecodes, possibly while that
thread holds a plain lock the handler then needs, which it waits for forever:

- the lock inside a ``threading.Event`` it is waiting on (``Event.wait`` re-takes its
  condition's lock on every timeout): `hookbus dev` hung so on Ctrl-C;
- the lock ``threading`` takes while it starts a thread, so a handler must not start one
  either: a supervised RQ worker hung so when SIGTERM came as its heartbeat thread started.

A :class:`StopEvent` is therefore what a handler sets: its condition's lock is reentrant, so
the main thread that holds it takes it again, and no thread is started.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

log = logging.getLogger(__name__)

#: Exit code of a worker stopped at once by a second SIGINT (128 + SIGINT, like a shell).
EXIT_INTERRUPTED = 130


class StopEvent(threading.Event):
    """A ``threading.Event`` that a signal handler may set in the thread it interrupted.

    Same behaviour as its base; only its lock differs: reentrant, so ``set()`` from a handler
    that interrupted this event's own ``wait()`` in the main thread does not wait for itself.
    """

    def __init__(self) -> None:
        super().__init__()
        self._reentrant = threading.Condition(threading.RLock())
        self._set = False

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        with self._reentrant:
            self._set = True
            self._reentrant.notify_all()

    def clear(self) -> None:
        with self._reentrant:
            self._set = False

    def wait(self, timeout: float | None = None) -> bool:
        with self._reentrant:
            if not self._set:
                self._reentrant.wait(timeout)
            return self._set


def set_soon(event: threading.Event) -> None:
    """Set ``event`` from a signal handler without waiting for a lock this thread holds.

    A :class:`StopEvent` is set at once. A plain ``threading.Event`` is set from a short-lived
    thread, which cannot wait for the event's lock but can wait for the one ``threading``
    holds while it starts a thread: long-running commands make their stop a ``StopEvent``.
    """
    if isinstance(event, StopEvent):
        event.set()
        return
    threading.Thread(target=event.set, name="hookbus-signal", daemon=True).start()


@contextmanager
def graceful_signals(stop_event: threading.Event) -> Iterator[None]:
    """First SIGTERM/SIGINT sets ``stop_event``; a second SIGINT calls ``os._exit(130)``.

    Installed only by the CLI (never at import), and only in the main thread. The previous
    handlers are restored on exit.
    """
    seen = {"count": 0}

    def handle(signum: int, frame: FrameType | None) -> None:
        seen["count"] += 1
        if seen["count"] == 1:
            log.warning(
                "%s received: finishing in-flight work, then stopping "
                "(press Ctrl-C again to exit at once)",
                signal.Signals(signum).name,
            )
            set_soon(stop_event)
            return
        if signum == signal.SIGINT:
            log.warning("second SIGINT: exiting at once")
            os._exit(EXIT_INTERRUPTED)
        log.warning("%s received again: still stopping", signal.Signals(signum).name)

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
