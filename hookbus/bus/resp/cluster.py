"""The lean client on a Redis Cluster: each command to the master of its key's slot.

A ``redis+cluster://`` URL names one seed node. The first command reads the slot map
(``CLUSTER SLOTS``, once per process) and goes to the master serving its key's hash slot
over a plain :class:`~hookbus.bus.resp.client.RespConnection` to that node. The map is
read again when a node answers ``MOVED`` (the slot lives elsewhere now: a resharding or a
failover), when a master cannot be reached (a replica is being promoted), and a command
answered ``ASK`` (a slot being migrated) is sent once to the node named, after ``ASKING``.
A command is resent only when Redis did not run it: a redirect, or a connection that
could not be opened; one that broke after sending is reported, never repeated (an XADD
repeated could publish twice).

Every command of one pipeline must live in one hash slot (every key of a namespace
partition does, see :mod:`hookbus.bus.keys`). Standard library only.
"""

from __future__ import annotations

import time

from hookbus.bus.resp import Address, mask_url
from hookbus.bus.resp.client import (
    CONNECT_TIMEOUT_S,
    Reply,
    ReplyError,
    RespConnection,
    RespTimeout,
)
from hookbus.errors import RedisUnavailable

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: the per-event path does not import typing
if TYPE_CHECKING:
    from hookbus.bus.resp import Arg

#: Hash slots of a Redis Cluster.
SLOTS = 16384
#: Redirects followed for one command before giving up (a map changing under our feet).
MAX_REDIRECTS = 5
#: Pause between two tries while a slot has no reachable master (a promotion under way), s.
RETRY_PAUSE_S = 0.05

_crc_table: list[int] = []


def _table() -> list[int]:
    """CRC16-CCITT (XMODEM), the cluster's key hash, built on first use."""
    if not _crc_table:
        for byte in range(256):
            crc = byte << 8
            for _ in range(8):
                crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            _crc_table.append(crc & 0xFFFF)
    return _crc_table


def key_slot(key: bytes | str) -> int:
    """The hash slot of ``key``: of its ``{hash tag}`` when it has a non-empty one."""
    data = key.encode() if isinstance(key, str) else key
    start = data.find(b"{")
    if start >= 0:
        end = data.find(b"}", start + 1)
        if end > start + 1:
            data = data[start + 1 : end]
    table = _table()
    crc = 0
    for byte in data:
        crc = ((crc << 8) & 0xFFFF) ^ table[((crc >> 8) ^ byte) & 0xFF]
    return crc % SLOTS


def routing_key(command: tuple[Arg, ...]) -> bytes | str | None:
    """The key a command is routed by: its first argument after the name (every command
    the lean path sends has its key there), None for key-less ones (TIME, PING)."""
    if len(command) < 2:
        return None
    key = command[1]
    return key if isinstance(key, bytes | str) else None


def _redirect(reply: Reply) -> tuple[str, int, tuple[str, int]] | None:
    """``(MOVED|ASK, slot, (host, port))`` of a redirect reply, else None."""
    if not isinstance(reply, ReplyError):
        return None
    kind, _, rest = reply.text.partition(" ")
    if kind not in ("MOVED", "ASK"):
        return None
    slot, _, where = rest.partition(" ")
    host, _, port = where.rpartition(":")
    if not slot.isdigit() or not port.isdigit():
        return None
    return kind, int(slot), (host.strip("[]"), int(port))


class ClusterConnection:
    """Connections to a cluster's masters, routed by key slot. Same surface as
    :class:`~hookbus.bus.resp.client.RespConnection` (``call``, ``pipeline``, ``close``)
    plus ``key=`` to route a key-less pipeline. Not thread-safe."""

    def __init__(self, url: str, *, connect_timeout_s: float = CONNECT_TIMEOUT_S) -> None:
        self.url = url
        self.address = Address(url)
        self.connect_timeout_s = connect_timeout_s
        #: nodes to read the slot map from: the seed, then every node the map named
        self._seeds: list[tuple[str, int]] = [(self.address.host, self.address.port)]
        #: (first slot, last slot, master) of each range; empty until read
        self._ranges: list[tuple[int, int, tuple[str, int]]] = []
        self._nodes: dict[tuple[str, int], RespConnection] = {}
        #: slot map reads so far (tests and logs)
        self.refreshes = 0

    # --- nodes and the slot map ---------------------------------------------------------

    def _node(self, where: tuple[str, int]) -> RespConnection:
        conn = self._nodes.get(where)
        if conn is None:
            address = self.address.node(*where)
            conn = RespConnection(
                address.url(masked=False),
                connect_timeout_s=self.connect_timeout_s,
                address=address,
            )
            self._nodes[where] = conn
        return conn

    def master_of(self, slot: int, deadline: float | None = None) -> tuple[str, int]:
        """The master serving ``slot`` (the map read when not yet known)."""
        if not self._ranges:
            self.refresh(deadline)
        for first, last, master in self._ranges:
            if first <= slot <= last:
                return master
        raise RedisUnavailable(mask_url(self.url), f"no master serves hash slot {slot}")

    def refresh(self, deadline: float | None = None) -> None:
        """Read the slot map from the first node that answers ``CLUSTER SLOTS``."""
        self.refreshes += 1
        errors: list[str] = []
        for where in list(self._seeds):
            conn = self._node(where)
            try:
                reply = conn.call("CLUSTER", "SLOTS", deadline=deadline)
            except RespTimeout:
                raise
            except RedisUnavailable as exc:
                errors.append(f"{where[0]}:{where[1]}: {exc.reason}")
                continue
            ranges = self._parse(reply, where)
            if ranges:
                self._ranges = ranges
                for _, _, master in ranges:
                    if master not in self._seeds:
                        self._seeds.append(master)
                return
            errors.append(f"{where[0]}:{where[1]}: an empty slot map")
        raise RedisUnavailable(
            mask_url(self.url), "no cluster node answered CLUSTER SLOTS (" + "; ".join(errors) + ")"
        )

    @staticmethod
    def _parse(reply: Reply, asked: tuple[str, int]) -> list[tuple[int, int, tuple[str, int]]]:
        ranges = []
        for entry in reply if isinstance(reply, list) else []:
            if not isinstance(entry, list) or len(entry) < 3:
                continue
            first, last, master = entry[0], entry[1], entry[2]
            if not (isinstance(first, int) and isinstance(last, int)):
                continue
            if not isinstance(master, list) or len(master) < 2:
                continue
            host, port = master[0], master[1]
            name = host.decode() if isinstance(host, bytes) and host else asked[0]
            if isinstance(port, int):
                ranges.append((first, last, (name, port)))
        return ranges

    # --- commands -----------------------------------------------------------------------

    def call(
        self, *args: Arg, deadline: float | None = None, key: bytes | str | None = None
    ) -> Reply:
        """One command, to the master of its key; an error reply raises."""
        (reply,) = self.pipeline([args], deadline=deadline, key=key)
        if isinstance(reply, ReplyError):
            raise reply
        return reply

    def pipeline(
        self,
        commands: list[tuple[Arg, ...]],
        *,
        deadline: float | None = None,
        key: bytes | str | None = None,
        until_error: bool = False,
    ) -> list[Reply]:
        """``commands`` in one write to the master of their slot (``key``'s, else the
        first keyed command's), following MOVED / ASK and a failed-over master."""
        if key is None:
            key = next((k for k in map(routing_key, commands) if k is not None), None)
        slot = key_slot(key) if key is not None else 0
        asking: tuple[str, int] | None = None
        for _ in range(MAX_REDIRECTS):
            if asking is not None:
                where, batch = asking, [cmd for c in commands for cmd in (("ASKING",), c)]
            else:
                where, batch = self._reachable_master(slot, deadline), commands
            try:
                replies = self._node(where).pipeline(
                    batch, deadline=deadline, until_error=until_error and asking is None
                )
            except RespTimeout:
                raise
            except RedisUnavailable:
                self._ranges = []  # the node broke after the send: re-read the map next time
                raise
            if asking is not None:
                replies = replies[1::2]
                asking = None
            redirect = _redirect(replies[0]) if replies else None
            if redirect is None:
                return replies
            kind, _, target = redirect
            if kind == "ASK":
                asking = target
            else:
                self._seeds.insert(0, target)
                self.refresh(deadline)
        raise RedisUnavailable(
            mask_url(self.url), f"hash slot {slot} kept moving ({MAX_REDIRECTS} redirects)"
        )

    def _reachable_master(self, slot: int, deadline: float | None) -> tuple[str, int]:
        """The master of ``slot`` with its connection open; a master that cannot be
        reached makes the map be read again (its replica may have been promoted), until
        the deadline."""
        while True:
            where = self.master_of(slot, deadline)
            conn = self._node(where)
            try:
                conn.connect(deadline)
                return where
            except RedisUnavailable as exc:
                # the master is gone: ask the others who serves the slot now
                self._seeds = [s for s in self._seeds if s != where] + [where]
                self.refresh(deadline)
                if self.master_of(slot, deadline) != where:
                    continue
                if deadline is None or time.monotonic() + RETRY_PAUSE_S >= deadline:
                    raise exc
                time.sleep(RETRY_PAUSE_S)

    def close(self) -> None:
        for conn in self._nodes.values():
            conn.close()
        self._nodes.clear()

    def __enter__(self) -> ClusterConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
