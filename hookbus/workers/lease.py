"""A chain worker's ownership lease: the heartbeat that says its pending requests are its own.

While a worker lives, a daemon thread sets ``hookbus:{ns}:lease:<worker id>`` with a TTL
of :data:`LEASE_TTL_MS` every :data:`LEASE_REFRESH_MS`. Other workers take over its
pending requests only once the lease is gone (the key expired by Redis's own clock), never
because an entry has sat idle: a chain that runs for seconds, or a hook holding the GIL for
300 ms (which delays this thread by as much), keeps its requests. A worker that dies loses
its lease within :data:`LEASE_TTL_MS`.
"""

from __future__ import annotations

import logging
import os
import threading

import redis

from hookbus.bus import keys as keymod
from hookbus.bus.connection import CONNECTION_ERRORS

log = logging.getLogger(__name__)

#: How often the lease is renewed, in ms.
LEASE_REFRESH_MS = 250
#: How long a lease outlives its last renewal, in ms: the longest the GIL may be held (or
#: the process stalled) before the worker's requests are taken over, and the longest a
#: dead worker's requests wait for a new owner.
LEASE_TTL_MS = 2_000

_ERRORS: tuple[type[BaseException], ...] = (*CONNECTION_ERRORS, redis.exceptions.RedisError)


class OwnerLease:
    """Keeps one worker's lease alive from a daemon thread; :meth:`stop` deletes it."""

    def __init__(
        self,
        client: redis.Redis,
        namespace: str,
        worker_id: str,
        *,
        refresh_ms: int = LEASE_REFRESH_MS,
        ttl_ms: int = LEASE_TTL_MS,
    ) -> None:
        self.client = client
        self.key = keymod.worker_lease(namespace, worker_id)
        self.refresh_ms = refresh_ms
        self.ttl_ms = ttl_ms
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def renew(self) -> bool:
        """Set the lease once now; False (logged) when Redis cannot be reached."""
        try:
            self.client.set(self.key, os.getpid(), px=self.ttl_ms)
        except _ERRORS as exc:
            log.warning("ownership lease %s not renewed: %s", self.key, exc)
            return False
        return True

    def start(self) -> None:
        """Take the lease now (before any request is read), then renew it in the background."""
        self.renew()
        self._thread = threading.Thread(target=self._run, name="owner-lease", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.refresh_ms / 1000):
            self.renew()

    def stop(self) -> None:
        """Stop renewing and give the lease up (a clean stop has answered its requests)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        try:
            self.client.delete(self.key)
        except _ERRORS as exc:
            log.warning("ownership lease %s not removed: %s", self.key, exc)
