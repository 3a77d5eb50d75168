"""Signal handling for long-running commands (workers, `hookbus dev`), which cannot deadlock.

The first SIGTERM or SIGINT asks for a graceful stop; a second SIGINT exits at once.

A Python signal handler runs in the main thread between two bytecodes, possibly while that
thread holds the lock inside a ``threading.Event`` it is waiting on (``Event.wait`` re-takes
its condition's lock on every timeout). Calling ``event.set()`` from the handler then waits
for a lock its own thread holds, forever: `hookbus dev` hung exactly so on Ctrl-C. Handlers
therefore hand the ``set()`` to a short-lived thread.
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


def set_soon(event: threading.Event) -> None:
    """Set ``event`` from a signal handler without touching its lock in this thread."""
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
