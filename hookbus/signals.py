"""Signal handling that cannot deadlock.

A Python signal handler runs in the main thread between two bytecodes, possibly while that
thread holds the lock inside a ``threading.Event`` it is waiting on (``Event.wait`` re-takes
its condition's lock on every timeout). Calling ``event.set()`` from the handler then waits
for a lock its own thread holds, forever: `hookbus dev` hung exactly so on Ctrl-C. Handlers
therefore hand the ``set()`` to a short-lived thread.
"""

from __future__ import annotations

import threading


def set_soon(event: threading.Event) -> None:
    """Set ``event`` from a signal handler without touching its lock in this thread."""
    threading.Thread(target=event.set, name="hookbus-signal", daemon=True).start()
