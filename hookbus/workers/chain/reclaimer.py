"""Crash recovery of the request stream: the pending requests of a dead worker get a new
owner, at most once.

Ownership is judged by the owner's lease (:mod:`~hookbus.workers.chain.lease`), not by how long
an entry has been idle, so a live worker's slow chain is never run a second time
elsewhere. Each worker's reclaim thread wakes every 250-500 ms (jittered, so a fleet does
not beat in step) and first asks XPENDING for the group's summary: one command, whatever
is in flight. Only when some consumer holds entries does it read those consumers' leases
(one MGET), and a consumer whose lease is missing on two passes in a row, or holds the
tombstone its supervisor wrote when it saw that process die (on the first pass), is taken
over by ``chain_claim.lua``: atomic, so two reclaimers never both take an entry.

A taken-over request that its dead worker had answered (the reply is in the producer's
inbox, its XACK was still in that worker's ack ledger) is logged from the reply and not
run again (:mod:`~hookbus.workers.chain.recovery`). Any other is run again if its deadline
holds, once: an entry whose worker died
after it had already been handed over (its third delivery, or past
``workers.max_deliveries``) is not run again. It is answered by its kind's policy, flagged
degraded, and dead-lettered, so a request that kills workers cannot take the fleet down.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import redis
import redis.exceptions

from hookbus.bus import lua
from hookbus.bus.connection import CONNECTION_ERRORS
from hookbus.bus.keys import CHAIN_GROUP, Keys, worker_lease
from hookbus.workers.chain.deaths import DEAD_LEASE
from hookbus.workers.chain.recovery import recover_answers
from hookbus.workers.chain.replier import Op, Replier
from hookbus.workers.chain.runner import ChainRunner
from hookbus.workers.fleet.backoff import Backoff

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings
    from hookbus.workers.fleet.heartbeat import Heartbeat

log = logging.getLogger(__name__)

#: Shortest wait between two reclaim passes of one worker, in s (each wait is this times a
#: random factor in [1, 2)).
RECLAIM_INTERVAL_S = 0.25
#: A dead consumer's entries idle at least this long are taken, in ms. Leases decide; this
#: only keeps a worker of an older version (which touched its entries every 25 ms instead
#: of holding a lease) from losing its requests during a rolling upgrade.
RECLAIM_IDLE_MS = 100
#: Entries one claim takes at most (a longer backlog takes several).
RECLAIM_COUNT = 100
#: Bound on claims per dead consumer per pass.
RECLAIM_MAX_ROUNDS = 10
#: Deliveries after which a request is no longer run: the first, plus one hand-over.
MAX_RUNS = 2


def _text(name: bytes | str) -> str:
    return name.decode() if isinstance(name, bytes) else name


def _entry_id(raw: bytes | str) -> bytes:
    return raw if isinstance(raw, bytes) else str(raw).encode()


class Reclaimer:
    """One worker's reclaim thread (see the module docstring)."""

    def __init__(
        self,
        client: redis.Redis,
        settings: Settings,
        keys: Keys,
        *,
        worker_id: str,
        runner: ChainRunner,
        replier: Replier,
        heartbeat: Heartbeat,
        stop_event: threading.Event,
        lease_client: redis.Redis | None = None,
    ) -> None:
        self.client = client
        #: Where the leases are (the namespace's own slot; on a cluster maybe another
        #: master than a partition's request stream).
        self.lease_client = lease_client if lease_client is not None else client
        self.settings = settings
        self.keys = keys
        self.worker_id = worker_id
        self.runner = runner
        self.replier = replier
        self.heartbeat = heartbeat
        self.stop_event = stop_event
        self._claim = lua.register(client, "hookbus.workers.chain", "chain_claim.lua")
        self._suspects: set[str] = set()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        #: whether this process reads the partition now (only its readers reclaim it)
        self.active: Callable[[], bool] = lambda: True

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._loop, name=f"reclaim-{self.worker_id}", daemon=True
        )
        self._thread.start()

    def join(self, timeout: float) -> None:
        self._wake.set()  # the stop is set: end the wait now
        if self._thread is not None:
            self._thread.join(timeout=timeout)

    def idle_ms(self) -> int:
        """A dead consumer's entries idle at least this long are taken."""
        return RECLAIM_IDLE_MS

    def wake(self) -> None:
        """Run a pass now (a supervisor announced a dead worker process)."""
        self._wake.set()

    def _loop(self) -> None:
        backoff = Backoff()
        delay = 0.0
        while not self.stop_event.is_set():
            self._wake.wait(delay or RECLAIM_INTERVAL_S * random.uniform(1, 2))
            self._wake.clear()
            if self.stop_event.is_set():
                break
            if not self.active():
                continue
            try:
                self.reclaim()
                backoff.reset()
                delay = 0.0
            except CONNECTION_ERRORS as exc:
                log.debug("reclaim: Redis unavailable (%s)", exc)
                delay = backoff.next_s()
            except redis.exceptions.ResponseError as exc:
                log.debug("reclaim: %s", exc)
                delay = backoff.next_s()
            except Exception:
                log.exception("reclaim pass failed")
                delay = backoff.next_s()

    def dead_consumers(self) -> dict[str, bool]:
        """Consumers holding entries whose lease is missing or a tombstone (XPENDING
        summary, then MGET), each with whether its death is certain (a tombstone: its
        supervisor saw it die)."""
        summary: Any = self.client.xpending(self.keys.requests, CHAIN_GROUP)
        if not summary or not summary.get("pending"):
            return {}
        others = [_text(c["name"]) for c in summary.get("consumers") or []]
        others = [name for name in others if name != self.worker_id]
        if not others:
            return {}
        leases = self.lease_client.mget([worker_lease(self.keys.ns, n) for n in others])
        return {
            name: lease == DEAD_LEASE
            for name, lease in zip(others, leases, strict=True)
            if lease is None or lease == DEAD_LEASE
        }

    def reclaim(self) -> int:
        """One pass: take over the entries of consumers whose supervisor saw them die, and
        of those found without a lease on this pass and the one before; answer them.
        Returns how many entries were taken."""
        found = self.dead_consumers()
        dead = set(found)
        certain = {name for name, sure in found.items() if sure}
        confirmed, self._suspects = (dead & self._suspects) | certain, dead
        taken = 0
        for consumer in sorted(confirmed):
            for _ in range(RECLAIM_MAX_ROUNDS):
                epoch = self.replier.read_epoch()  # taken-over entries are now this worker's
                # a process its supervisor saw die holds nothing anyone still runs
                idle_ms = 0 if consumer in certain else self.idle_ms()
                claimed = self._claim(
                    keys=[self.keys.requests],
                    args=[CHAIN_GROUP, consumer, self.worker_id, idle_ms, RECLAIM_COUNT],
                )
                if claimed:
                    log.warning(
                        "took over %d request(s) of %s (%s)",
                        len(claimed),
                        consumer,
                        "its supervisor saw it die" if consumer in certain else "its lease expired",
                    )
                    taken += len(claimed)
                    self.replier.stamp([_entry_id(c[0]) for c in claimed], epoch)
                    self._answer(claimed)
                if len(claimed) < RECLAIM_COUNT:
                    break
        if taken:
            self.runner.metrics.entries_reclaimed(taken)
        return taken

    def _answer(self, claimed: list[Any]) -> None:
        limit = min(MAX_RUNS, self.settings.workers.max_deliveries)
        entries = [
            (_entry_id(raw_id), int(deliveries), dict(zip(flat[::2], flat[1::2], strict=True)))
            for raw_id, deliveries, flat in claimed
        ]
        # answered by the dead worker, not yet settled: logged from the reply, not run again
        marks: list[bytes] = []
        answered = recover_answers(
            self.client,
            self.keys,
            [(entry_id, fields) for entry_id, _, fields in entries],
            max_event_bytes=self.settings.streams.max_event_bytes,
            marks=marks,
        )
        self.replier.ledger.mark(marks)
        if answered:
            self.heartbeat.count("recovered", len(answered))
            self.replier.ledger.add(list(answered.items()))
        ops: list[Op] = []
        for entry_id, deliveries, fields in entries:
            self.heartbeat.count("reclaimed")
            if entry_id in answered:
                continue
            if int(deliveries) > limit:
                log.error(
                    "request entry %s: its workers died running it %d times; answered by "
                    "policy and dead-lettered",
                    entry_id,
                    int(deliveries) - 1,
                )
                ops.extend(self.runner.abandoned(entry_id, fields, int(deliveries)))
                continue
            log.info("running taken-over request entry %s (delivery %d)", entry_id, deliveries)
            ops.append(self.runner.process(entry_id, fields, int(deliveries)))
        if ops:
            self.replier.flush(ops)
