"""Which partitions a chain worker process reads: a bounded number of readers per partition.

Every reader blocked in XREADGROUP on a stream is work for Redis on every XADD to it, so a
fleet where every worker reads every partition pays more per request the bigger it grows.
Instead each partition has ``workers.readers_per_partition`` reader slots (default 2), held
by chain worker processes as leases in Redis (``hookbus:{ns}:readers:<p>:<slot>``, a TTL of
``workers.partition_lease_ms``). A process reads (and reclaims) only the partitions whose
slot it holds; the others stay quiet, with no blocked read.

Every :data:`REBALANCE_S` (a second) each process reads every slot (one MGET), counts the live chain
processes, and moves toward its fair share, ``ceil(partitions * readers / processes)``:

- it renews what it holds (a lost slot stops its reads at once);
- a partition nobody reads is taken by whoever sees it first, whatever its share, so no
  partition stays unread longer than a lease (a holder that died) plus one round;
- below its share it takes free slots, partitions with no reader first, never two slots of
  one partition;
- above its share it gives back slots of partitions another process also reads, so handing
  over never leaves a partition unread.

A process that stops gives its slots back; one that dies loses them when their lease runs
out. With fewer processes than ``partitions * readers`` each reads several partitions; with
more, the rest wait as standbys (``hookbus status`` shows them) and take over when a reader
goes. ``readers_per_partition = 0`` keeps the unbounded fleet: every process reads every
partition.
"""

from __future__ import annotations

import logging
import math
import threading
from typing import TYPE_CHECKING

import redis

from hookbus.bus import lua
from hookbus.bus.connection import CONNECTION_ERRORS
from hookbus.bus.keys import chain_members, partition_reader

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings

log = logging.getLogger(__name__)

#: How often a process rebalances its reader slots, in seconds.
REBALANCE_S = 1.0

_ERRORS: tuple[type[BaseException], ...] = (*CONNECTION_ERRORS, redis.exceptions.RedisError)


def fair_share(partitions: int, readers: int, processes: int) -> int:
    """Slots one of ``processes`` should hold: every slot covered, evenly, none doubled."""
    slots = partitions * min(readers, max(processes, 1))
    return math.ceil(slots / max(processes, 1))


class ReaderSlots:
    """One process's reader slots, kept from a daemon thread; :meth:`holds` is the gate."""

    def __init__(
        self,
        client: redis.Redis,
        namespace: str,
        process_id: str,
        *,
        partitions: int,
        readers: int,
        lease_ms: int,
        stop_event: threading.Event,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.process_id = process_id
        self.partitions = partitions
        self.readers = readers
        self.lease_ms = lease_ms
        self.stop_event = stop_event
        #: live chain worker processes seen in the last round (this one included)
        self.processes = 1
        #: partition -> slot this process holds
        self.held: dict[int, int] = {}
        self._thread: threading.Thread | None = None
        self._script = lua.register(client, "hookbus.workers.chain", "reader_lease.lua")
        self._members = lua.register(client, "hookbus.workers.chain", "chain_members.lua")

    @property
    def unbounded(self) -> bool:
        return self.readers <= 0

    def holds(self, partition: int) -> bool:
        """Whether this process reads ``partition`` now."""
        return self.unbounded or partition in self.held

    def reading(self) -> list[int]:
        """The partitions this process reads, in order (for heartbeats and status)."""
        return list(range(self.partitions)) if self.unbounded else sorted(self.held)

    def start(self) -> None:
        if self.unbounded:
            return
        self.rebalance()  # before the first read: the gate is right from the start
        self._thread = threading.Thread(target=self._loop, name="reader-slots", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Give every slot back (a stopping process hands its partitions over at once)."""
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        for partition, slot in list(self.held.items()):
            try:
                self._script(keys=[self._key(partition, slot)], args=[self.process_id, 0])
            except _ERRORS as exc:
                log.info("reader slot %d/%d not given back (%s): it expires", partition, slot, exc)
        self.held.clear()

    def _loop(self) -> None:
        while not self.stop_event.wait(REBALANCE_S):
            try:
                self.rebalance()
            except _ERRORS as exc:
                log.warning("reader slots not rebalanced (%s); trying again", exc)

    def _key(self, partition: int, slot: int) -> str:
        return partition_reader(self.namespace, partition, slot)

    def rebalance(self) -> None:
        """One round: renew, cover unread partitions, move toward the fair share."""
        keys = [self._key(p, s) for p in range(self.partitions) for s in range(self.readers)]
        with self.client.pipeline(transaction=False) as pipe:
            self._members(
                keys=[chain_members(self.namespace)],
                args=[self.process_id, self.lease_ms],
                client=pipe,
            )
            pipe.mget(keys)
            alive, values = pipe.execute()
        self.processes = max(int(alive), 1)
        holders: dict[int, dict[int, str]] = {p: {} for p in range(self.partitions)}
        for index, value in enumerate(values):
            if value is not None:
                partition, slot = divmod(index, self.readers)
                holders[partition][slot] = (
                    value.decode() if isinstance(value, bytes) else str(value)
                )
        self._renew(holders)
        share = fair_share(self.partitions, self.readers, self.processes)
        # coverage first: an unread partition is taken whatever the share
        for partition in range(self.partitions):
            if not holders[partition]:
                self._take(partition, 0, holders)
        # then toward the share: partitions with the fewest readers first
        for partition in sorted(range(self.partitions), key=lambda p: len(holders[p])):
            if len(self.held) >= share:
                break
            if partition in self.held:
                continue
            free = [s for s in range(self.readers) if s not in holders[partition]]
            if free:
                self._take(partition, free[0], holders)
        # above the share: give back what another process also reads
        for partition in sorted(self.held, reverse=True):
            if len(self.held) <= share:
                break
            if len(holders[partition]) > 1:
                slot = self.held.pop(partition)
                self._script(keys=[self._key(partition, slot)], args=[self.process_id, 0])
                holders[partition].pop(slot, None)
                log.info("reader: handed partition %d over (fair share %d)", partition, share)

    def _renew(self, holders: dict[int, dict[int, str]]) -> None:
        for partition, slot in list(self.held.items()):
            if holders[partition].get(slot) != self.process_id or not self._script(
                keys=[self._key(partition, slot)], args=[self.process_id, self.lease_ms]
            ):
                self.held.pop(partition)
                log.warning("reader: lost partition %d (its lease ran out)", partition)

    def _take(self, partition: int, slot: int, holders: dict[int, dict[int, str]]) -> None:
        if partition in self.held:
            return
        if self.client.set(self._key(partition, slot), self.process_id, nx=True, px=self.lease_ms):
            self.held[partition] = slot
            holders[partition][slot] = self.process_id
            log.info("reader: reading partition %d (slot %d)", partition, slot)


def release_reader_slots(client: redis.Redis, settings: Settings, process_id: str) -> int:
    """Give back every reader slot ``process_id`` holds and drop it from the live chain
    processes: what a supervisor does for a worker process it saw die, so its partitions
    are read by another process on that one's next round, not a lease later. Returns how
    many slots it held."""
    readers = settings.workers.readers_per_partition
    if readers <= 0:
        return 0
    ns = settings.namespace
    script = lua.register(client, "hookbus.workers.chain", "reader_lease.lua")
    held = 0
    for partition in range(settings.partitions):
        for slot in range(readers):
            key = partition_reader(ns, partition, slot)
            held += int(script(keys=[key], args=[process_id, 0]))
    client.zrem(chain_members(ns), process_id)
    return held


def wait_gate(slots: ReaderSlots | None, partition: int, stop_event: threading.Event) -> bool:
    """True when this process reads ``partition`` now; otherwise waits a little (a standby
    costs Redis nothing) and says False."""
    if slots is None or slots.holds(partition):
        return True
    stop_event.wait(min(REBALANCE_S, 0.1))
    return False
