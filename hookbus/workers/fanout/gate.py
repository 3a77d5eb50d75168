"""Holding the event streams while a worker has no hook set to run them against.

A fan-out dispatcher (or request observer) that reads with no hooks loaded finds no hook
matching, acks every entry and the events are gone for good: it started before the first
``hookbus reload``, Redis came back empty and names no bundle, or its hooks folder does not
exist. Until a hook set loads it reads nothing, so the entries wait in the stream (and in
the consumer group) for the first set that can run them, and it says so once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

#: How often a held loop looks again whether a hook set has loaded, in seconds.
HOLD_POLL_S = 0.2


class HookSetGate:
    """Tells a read loop to wait while ``loaded()`` is False (no hook set to run)."""

    def __init__(self, loaded: Callable[[], bool], what: str) -> None:
        self.loaded = loaded
        self.what = what
        self.holding = False

    def hold(self, stop: threading.Event) -> bool:
        """True (after a short wait) while no hook set is loaded: the loop reads nothing
        this turn; False once one is."""
        if self.loaded():
            if self.holding:
                log.warning("%s: a hook set is loaded, reading again", self.what)
                self.holding = False
            return False
        if not self.holding:
            log.warning(
                "%s: no hook set is loaded (Redis names no bundle and no hooks folder loaded); "
                "events are left in the stream until `hookbus reload` publishes one",
                self.what,
            )
            self.holding = True
        stop.wait(HOLD_POLL_S)
        return True
