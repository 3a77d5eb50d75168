"""Setting a stop event from a signal handler never waits on the event's own lock."""

from __future__ import annotations

import threading
import time

from hookbus.workers.fleet.signals import set_soon


def test_set_soon_returns_while_this_thread_holds_the_event_lock() -> None:
    event = threading.Event()
    # the state a signal handler can interrupt: Event.wait re-taking its lock
    with event._cond:  # type: ignore[attr-defined]
        started = time.monotonic()
        set_soon(event)
        assert time.monotonic() - started < 0.5
        assert not event.is_set()
    assert event.wait(5)
