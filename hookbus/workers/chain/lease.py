"""A chain worker's ownership lease: the heartbeat that says its pending requests are its own.

While a worker lives, a daemon thread sets ``hookbus:{ns}:lease:<worker id>`` with a TTL
of :data:`LEASE_TTL_MS` every :data:`LEASE_REFRESH_MS`. Other workers take over its
pending requests only once the lease is gone (the key expired by Redis's own clock), never
because an entry has sat idle: a chain that runs for seconds, or a hook holding the GIL for
300 ms (which delays this thread by as much), keeps its requests. A worker that dies loses
its lease within :data:`LEASE_TTL_MS`.

The lease also lets the worker answer without a per-request XACK (see
:mod:`~hookbus.workers.chain.ledger`): while :meth:`OwnerLease.holds` is true for the epoch an
entry was read in, no other worker can have taken that entry over, so its answer needs no
guard. Freshness is judged on this process's monotonic clock from the moment a renewal was
sent (the key cannot expire earlier than that moment plus its TTL); a renewal that finds
the key gone (``SET ... GET`` returned nothing) means the lease lapsed and others may have
taken entries over, so the epoch moves on and everything read before it goes through the
guarded path.
"""

from __future__ import annotations

import logging
import os
import threading
import time

import redis

from hookbus.bus import keys
from hookbus.bus.connection import CONNECTION_ERRORS

log = logging.getLogger(__name__)

#: How often the lease is renewed, in ms.
LEASE_REFRESH_MS = 250
#: How long a lease outlives its last renewal, in ms: the longest the GIL may be held (or
#: the process stalled) before the worker's requests are taken over, and the longest a
#: dead worker's requests wait for a new owner.
LEASE_TTL_MS = 2_000
#: How long after a renewal was sent the lease counts as held for unguarded answers, in ms:
#: half its TTL, leaving a second for clock-rate differences and a slow renewal.
LEASE_FRESH_MS = LEASE_TTL_MS // 2

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
        self.key = keys.worker_lease(namespace, worker_id)
        self.refresh_ms = refresh_ms
        self.ttl_ms = ttl_ms
        self.fresh_ms = min(LEASE_FRESH_MS, ttl_ms // 2)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: Moves on each time a renewal finds the lease lapsed (see the module docstring).
        self.epoch = 0
        self._renewed_at: float | None = None  # monotonic s when the last good renewal was sent
        self._lock = threading.Lock()

    def renew(self) -> bool:
        """Set the lease once now; False (logged) when Redis cannot be reached."""
        sent_at = time.monotonic()
        try:
            previous = self.client.set(self.key, os.getpid(), px=self.ttl_ms, get=True)
        except _ERRORS as exc:
            log.warning("ownership lease %s not renewed: %s", self.key, exc)
            return False
        with self._lock:
            if previous is None and self._renewed_at is not None:
                self.epoch += 1
                log.warning(
                    "ownership lease %s had lapsed: requests read before now are answered "
                    "through the guarded path",
                    self.key,
                )
            self._renewed_at = sent_at
        return True

    def holds(self, epoch: int) -> bool:
        """Whether entries read in ``epoch`` are certainly still this worker's alone: the
        lease has not lapsed since, and its last renewal was sent within ``fresh_ms``."""
        with self._lock:
            renewed_at = self._renewed_at
            current = self.epoch
        if renewed_at is None or epoch != current:
            return False
        return (time.monotonic() - renewed_at) * 1000 < self.fresh_ms

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
