"""Taking over a dead worker process's requests at once, not at the next reclaim pass.

A chain worker runs under a supervisor (:mod:`hookbus.workers.fleet.respawn`) that sees its
child die the moment it does (a hook's ``os._exit``, a segfault). Left to the leases, the
fleet would notice a lease gone on two reclaim passes in a row (250-500 ms apart), up to a
second after the death: longer than most requests' deadline, so the requests the dead
process held would be answered by policy, degraded, although another worker is alive.

So the supervisor :func:`bury` s its child: the child's lease becomes a tombstone
(:data:`DEAD_LEASE`, which a reclaimer trusts on its first pass), its reader slots are given
back, and its worker id is published on the deaths channel. Every chain worker process
holds a :class:`DeathWatch`, one subscribed connection, that wakes its reclaimers when a
death is announced. Pub/sub may lose the message (a reconnect): the tombstone still has the
requests taken over at the next ordinary pass.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import redis

from hookbus.bus import keys
from hookbus.bus.connection import CONNECTION_ERRORS
from hookbus.workers.chain.partitions import release_reader_slots
from hookbus.workers.reload.subscriber import ReloadSubscriber

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings

log = logging.getLogger(__name__)

#: What a supervisor writes into the lease of a worker process it saw die.
DEAD_LEASE = b"dead"
#: How long a dead worker's tombstone lease stays, in ms (its requests are taken long before).
DEAD_LEASE_TTL_MS = 60_000
#: How long one wait for an announcement lasts, in s (the stop is noticed in between).
WATCH_WAIT_S = 0.5
#: Longest wait before subscribing again after Redis was lost, in s.
RECONNECT_MAX_WAIT_S = 2.0

_ERRORS: tuple[type[BaseException], ...] = (*CONNECTION_ERRORS, redis.exceptions.RedisError)


def bury(client: redis.Redis, settings: Settings, worker_id: str) -> None:
    """What a supervisor does for a chain worker process it saw die: tombstone its lease,
    give back its reader slots, announce it. Raises redis-py's errors (the caller logs)."""
    ns = settings.namespace
    client.set(keys.worker_lease(ns, worker_id), DEAD_LEASE, px=DEAD_LEASE_TTL_MS)
    release_reader_slots(client, settings, worker_id)
    client.publish(keys.deaths_channel(ns), worker_id)


class DeathWatch:
    """One process's subscription to the deaths channel; calls ``wake()`` on each death."""

    def __init__(
        self,
        client: redis.Redis,
        namespace: str,
        client_name: str,
        wake: Callable[[], None],
        stop_event: threading.Event,
    ) -> None:
        self.client = client
        self.channel = keys.deaths_channel(namespace)
        self.client_name = client_name
        self.wake = wake
        self.stop_event = stop_event
        self._thread: threading.Thread | None = None

    def start(self) -> DeathWatch:
        self._thread = threading.Thread(target=self._loop, name="death-watch", daemon=True)
        self._thread.start()
        return self

    def join(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout=timeout)

    def _loop(self) -> None:
        subscriber: ReloadSubscriber | None = None
        wait_s = 0.05
        while not self.stop_event.is_set():
            try:
                if subscriber is None:
                    # a reconnect may have lost an announcement: reclaim once to be sure
                    subscriber = ReloadSubscriber(
                        self.client, self.channel, self.client_name, self.wake
                    )
                if subscriber.announced(WATCH_WAIT_S):
                    self.wake()
                wait_s = 0.05
            except _ERRORS as exc:
                log.debug("death watch lost Redis (%s); subscribing again", exc)
                if subscriber is not None:
                    subscriber.close()
                    subscriber = None
                self.stop_event.wait(wait_s)
                wait_s = min(wait_s * 2, RECONNECT_MAX_WAIT_S)
        if subscriber is not None:
            subscriber.close()
