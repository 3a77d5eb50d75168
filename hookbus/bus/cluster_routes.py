"""Slot routes on a Redis Cluster that follow a failover, for every connection of a process.

The bus talks to a cluster through plain connections to the master serving a slot (see
:mod:`hookbus.bus.connection`). A master can fail and a replica take its slots over; a
process that kept the old address for its whole life would fail every request of those
slots until it restarted. So a connection made for a slot does not hold an address: it
holds that slot's :class:`SlotRoute`, shared by every connection of the process made for the
slot (pooled, hand-packed, sync or asyncio), and asks it for the address each time it
connects. A route moves when

* a connection to it cannot be opened: the process re-reads ``CLUSTER SLOTS`` from any node
  it knows (at most once per :data:`REFRESH_MIN_INTERVAL_S`) and retries once if the slot
  has a new master;
* a command is answered ``MOVED <slot> <host:port>`` (the slot has a new master, or the old
  master came back as a replica): the route takes the address from the answer, the
  connection is dropped, and the command fails as a connection error, which every caller
  already treats as "Redis unavailable, try again" (redis-py's own retry resends it on the
  new master at once);
* ``ASK``, ``CLUSTERDOWN`` or ``TRYAGAIN`` (a slot migrating, a failover under way): the
  routes are re-read and the command fails as a connection error.

A connection whose route moved since it connected is dropped before its next command. So a
failover costs each affected request at most its deadline until a replica is promoted, and
nothing after: the first connection error after the promotion finds the new master.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import redis
import redis.exceptions

log = logging.getLogger(__name__)

#: Shortest time between two ``CLUSTER SLOTS`` reads of one cluster by one process, in s:
#: during a failover every failed connection asks, and the answer changes only once.
REFRESH_MIN_INTERVAL_S = 0.2
#: How long one node may take to answer ``CLUSTER SLOTS`` before the next is asked, in s.
REFRESH_NODE_TIMEOUT_S = 0.5

#: Redis errors that mean "this slot is being moved or failed over": re-read the routes.
_MOVING_ERRORS = (
    redis.exceptions.AskError,  # MovedError is a subclass
    redis.exceptions.ClusterDownError,
    redis.exceptions.TryAgainError,
)


class SlotMoved(redis.exceptions.ConnectionError):
    """A command reached a node that no longer serves its slot (``MOVED``), or a slot in the
    middle of a failover or migration: the route was updated, and the command may be sent
    again. A connection error, so every retry loop treats it as one."""


class ClusterMap:
    """One cluster's slot table as this process knows it, and the routes built on it."""

    def __init__(self, url: str, plain_url: str) -> None:
        self.url = url
        parts = urlsplit(plain_url)
        self._template = parts
        seed = (parts.hostname or "127.0.0.1", parts.port or 6379)
        #: Nodes to ask for ``CLUSTER SLOTS``, the last one that answered first.
        self._nodes: list[tuple[str, int]] = [seed]
        self._ranges: list[tuple[int, int, str, int]] = []
        self._routes: dict[int, SlotRoute] = {}
        self._lock = threading.Lock()
        self._refreshed_at = -1e18

    def route(self, slot: int) -> SlotRoute:
        """The route of ``slot`` (read from the cluster on first use)."""
        with self._lock:
            route = self._routes.get(slot)
        if route is not None:
            return route
        if not self._ranges:
            self.refresh(force=True)
            if not self._ranges:
                raise redis.exceptions.ConnectionError(
                    f"no node of {self.url} answered CLUSTER SLOTS"
                )
        address = self._owner(slot)
        if address is None:
            raise redis.exceptions.ConnectionError(f"no master of {self.url} serves slot {slot}")
        with self._lock:
            route = self._routes.setdefault(slot, SlotRoute(self, slot, address))
        return route

    def node_url(self, address: tuple[str, int]) -> str:
        """The plain URL (credentials and TLS kept) of the node at ``address``."""
        auth = self._template.netloc.rpartition("@")[0]
        host, port = address
        netloc = f"{auth}@{host}:{port}" if auth else f"{host}:{port}"
        return self._template._replace(netloc=netloc, path="/0").geturl()

    def _owner(self, slot: int) -> tuple[str, int] | None:
        with self._lock:
            for start, end, host, port in self._ranges:
                if start <= slot <= end:
                    return host, port
        return None

    def refresh(self, *, force: bool = False, timeout_s: float = REFRESH_NODE_TIMEOUT_S) -> bool:
        """Re-read ``CLUSTER SLOTS`` (unless read within :data:`REFRESH_MIN_INTERVAL_S`)
        and move the routes whose master changed; True when any moved."""
        with self._lock:
            now = time.monotonic()
            if not force and now - self._refreshed_at < REFRESH_MIN_INTERVAL_S:
                return False
            self._refreshed_at = now
            nodes = list(self._nodes)
        for address in nodes:
            rows = self._read_slots(address, timeout_s)
            if rows is not None:
                return self._apply(address, rows)
        log.warning("no node of %s answered CLUSTER SLOTS; keeping the routes", self.url)
        return False

    def _read_slots(self, address: tuple[str, int], timeout_s: float) -> list[Any] | None:
        client = redis.Redis.from_url(
            self.node_url(address),
            protocol=2,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            retry=None,
            **_no_handshake(),
        )
        try:
            rows: Any = client.execute_command("CLUSTER", "SLOTS")  # type: ignore[no-untyped-call]
        except (redis.exceptions.RedisError, OSError) as exc:
            log.debug("CLUSTER SLOTS from %s:%s failed: %s", *address, exc)
            return None
        finally:
            client.close()
        return list(rows) if rows else None

    def _apply(self, asked: tuple[str, int], rows: list[Any]) -> bool:
        ranges: list[tuple[int, int, str, int]] = []
        known: list[tuple[str, int]] = [asked]
        for row in rows:
            start, end, *nodes = row
            for index, node in enumerate(nodes):
                raw_host = node[0].decode() if isinstance(node[0], bytes) else str(node[0])
                address = (raw_host or asked[0], int(node[1]))  # "": the node asked
                if address not in known:
                    known.append(address)
                if index == 0:
                    ranges.append((int(start), int(end), *address))
        with self._lock:
            self._ranges = ranges
            self._nodes = known
            routes = list(self._routes.values())
        moves: dict[tuple[tuple[str, int], tuple[str, int]], int] = {}
        for route in routes:
            owner, old = self._owner(route.slot), route.address
            if owner is not None and route.move_to(owner, why=None):
                moves[(old, owner)] = moves.get((old, owner), 0) + 1
        for ((old_host, old_port), (host, port)), count in moves.items():
            log.warning(
                "%d slot(s) of %s moved from %s:%s to %s:%s (CLUSTER SLOTS): following them",
                count,
                self.url,
                old_host,
                old_port,
                host,
                port,
            )
        return bool(moves)


def _no_handshake() -> dict[str, Any]:
    """Options that skip ``CLIENT SETINFO`` (two round trips a connection; see
    :func:`hookbus.bus.connection.no_handshake_kwargs`, which imports this module)."""
    try:
        import redis.driver_info  # noqa: F401
    except ImportError:
        return {"lib_name": None, "lib_version": None}
    return {"driver_info": None}


class SlotRoute:
    """Where one slot's master is now; ``generation`` counts its moves."""

    def __init__(self, cluster: ClusterMap, slot: int, address: tuple[str, int]) -> None:
        self.cluster = cluster
        self.slot = slot
        self.address = address
        self.generation = 0
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        """The plain URL of the slot's master now."""
        return self.cluster.node_url(self.address)

    def current(self) -> tuple[str, int, int]:
        with self._lock:
            return self.address[0], self.address[1], self.generation

    def move_to(self, address: tuple[str, int], *, why: str | None) -> bool:
        """Point the route at ``address``; True when it moved (logged unless ``why`` is
        None: the caller logs the moves of a whole refresh at once)."""
        with self._lock:
            if address == self.address:
                return False
            old, self.address = self.address, address
            self.generation += 1
        if why is None:
            return True
        log.warning(
            "slot %d of %s moved from %s:%s to %s:%s (%s): following it",
            self.slot,
            self.cluster.url,
            *old,
            *address,
            why,
        )
        return True

    def refresh(self, timeout_s: float = REFRESH_NODE_TIMEOUT_S) -> bool:
        """Re-read the cluster's routes (throttled); True when this route moved."""
        generation = self.generation
        self.cluster.refresh(timeout_s=timeout_s)
        return self.generation != generation

    def follow(self, error: redis.exceptions.ResponseError) -> SlotMoved:
        """What a connection raises for a ``MOVED`` / ``ASK`` / ``CLUSTERDOWN`` answer,
        after moving the route when the answer names the slot's new master."""
        if isinstance(error, redis.exceptions.MovedError) and error.slot_id == self.slot:
            self.move_to((error.host, error.port), why="MOVED")
        else:
            self.cluster.refresh()
        return SlotMoved(f"slot {self.slot} of {self.cluster.url} is moving ({error}); retry")


class _RoutedMixin:
    """A redis-py connection that takes its address from a :class:`SlotRoute`."""

    route: SlotRoute
    _route_generation: int
    host: str
    port: int

    def _take_address(self) -> None:
        host, port, self._route_generation = self.route.current()
        self.host, self.port = host, port

    def _connect(self) -> Any:
        self._take_address()
        try:
            return super()._connect()  # type: ignore[misc]
        except OSError:
            timeout = getattr(self, "socket_connect_timeout", None) or REFRESH_NODE_TIMEOUT_S
            if not self.route.refresh(min(timeout, REFRESH_NODE_TIMEOUT_S)):
                raise
            self._take_address()
            return super()._connect()  # type: ignore[misc]

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        if getattr(self, "_sock", None) is not None and (
            self._route_generation != self.route.generation
        ):
            self.disconnect()  # type: ignore[attr-defined]  # the slot moved: reconnect
        super().send_packed_command(command, check_health)  # type: ignore[misc]

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().read_response(*args, **kwargs)  # type: ignore[misc]
        except _MOVING_ERRORS as exc:
            self.disconnect()  # type: ignore[attr-defined]  # later replies are moot
            raise self.route.follow(exc) from exc


class RoutedConnection(_RoutedMixin, redis.Connection):
    """A TCP connection to whichever node serves its route's slot now."""

    def __init__(self, *, route: SlotRoute, **kwargs: Any) -> None:
        self.route = route
        host, port, self._route_generation = route.current()
        super().__init__(**{**kwargs, "host": host, "port": port})  # type: ignore[no-untyped-call]


class RoutedSSLConnection(_RoutedMixin, redis.SSLConnection):
    """A TLS connection to whichever node serves its route's slot now."""

    def __init__(self, *, route: SlotRoute, **kwargs: Any) -> None:
        self.route = route
        host, port, self._route_generation = route.current()
        super().__init__(**{**kwargs, "host": host, "port": port})


_async_classes: dict[bool, type[Any]] = {}
_async_lock = threading.Lock()


def async_connection_class(tls: bool) -> type[Any]:
    """The redis.asyncio connection class that follows a route (built on first use, so the
    sync path never imports redis.asyncio)."""
    with _async_lock:
        cls = _async_classes.get(tls)
        if cls is None:
            cls = _async_classes[tls] = _make_async_class(tls)
        return cls


def _make_async_class(tls: bool) -> type[Any]:
    import asyncio

    import redis.asyncio.connection as aconn

    base: type[Any] = aconn.SSLConnection if tls else aconn.Connection

    class AsyncRoutedConnection(base):  # type: ignore[misc]
        """An asyncio connection to whichever node serves its route's slot now."""

        def __init__(self, *, route: SlotRoute, **kwargs: Any) -> None:
            self.route = route
            host, port, self._route_generation = route.current()
            super().__init__(**{**kwargs, "host": host, "port": port})

        def _take_address(self) -> None:
            self.host, self.port, self._route_generation = self.route.current()

        async def _connect(self) -> None:
            self._take_address()
            try:
                await super()._connect()
            except (TimeoutError, OSError):
                timeout = min(self.socket_connect_timeout or 1.0, REFRESH_NODE_TIMEOUT_S)
                if not await asyncio.to_thread(self.route.refresh, timeout):
                    raise
                self._take_address()
                await super()._connect()

        async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
            if self.is_connected and self._route_generation != self.route.generation:
                await self.disconnect()
            await super().send_packed_command(command, check_health)

        async def read_response(self, *args: Any, **kwargs: Any) -> Any:
            try:
                return await super().read_response(*args, **kwargs)
            except _MOVING_ERRORS as exc:
                with contextlib.suppress(Exception):
                    await self.disconnect()
                raise await asyncio.to_thread(self.route.follow, exc) from exc

    return AsyncRoutedConnection


_maps: dict[str, ClusterMap] = {}
_maps_lock = threading.Lock()


def cluster_map(url: str, plain_url: str) -> ClusterMap:
    """The process's map of the cluster at ``url`` (one per URL)."""
    with _maps_lock:
        found = _maps.get(url)
        if found is None:
            found = _maps[url] = ClusterMap(url, plain_url)
        return found


def forget_maps() -> None:
    """Drop every cluster map (tests, shutdown): the next use reads the cluster again."""
    with _maps_lock:
        _maps.clear()
