"""The producer SDK: :class:`HookBus` (sync) and :class:`AsyncHookBus` (asyncio).

An agent runtime calls ``request(event)`` on every blocking lifecycle event and gets a
:class:`Decision` back before the deadline, always: from the fleet's hook chain when a chain
worker answers in time, else from the failure policy (``degraded=True``, with a reason).
Bus trouble (no worker, Redis down, timeout) never raises unless ``strict=True``; caller
mistakes (unknown kind, observe-only kind, oversize event) always do.

Transports, chosen by measurement (``docs/blocking.md`` has the figures):

* sync: XADD + BLPOP pipelined on a dedicated connection (one round trip), the reply read
  with a socket timeout equal to the time left. Redis's own BLPOP timeout is set past the
  client's deadline and never decides; a connection whose read timed out is dropped (its
  BLPOP may still pop a late reply, which must not land on the next request).
* asyncio: one reply inbox stream per client, read by one reader task that resolves a
  future per request id; ``asyncio.timeout`` enforces each deadline. Bounded connections,
  no connection held per waiting call.

Imports stay light (redis, msgspec, the core): this module runs in agents' per-event
processes. typer, rich, rq and pydantic are never imported from here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal

import redis
import redis.asyncio
import redis.exceptions
from redis.backoff import NoBackoff
from redis.retry import Retry

from hookbus.bus import reqrep
from hookbus.bus.connection import CONNECT_TIMEOUT_S, check_url, connect, translate_error
from hookbus.bus.keys import Keys
from hookbus.bus.kinds import Catalogue, KindSpec
from hookbus.bus.settings import Settings, load_settings
from hookbus.bus.timeout_policy import Failure, policy_decision
from hookbus.bus.wire import Decision, Event, decode, new_id, now_ms
from hookbus.errors import (
    NoWorkerAlive,
    RedisCommandError,
    RedisUnavailable,
    RequestTimeout,
    WireError,
)

if TYPE_CHECKING:
    from types import TracebackType

log = logging.getLogger(__name__)

Policy = Literal["allow", "deny"]

#: How long a "some chain worker is alive" answer from the heartbeats is trusted, in s.
LIVENESS_CACHE_ALIVE_S = 1.0
#: How long a "no chain worker alive" answer is trusted (short: a worker may just start), s.
LIVENESS_CACHE_DEAD_S = 0.1
#: Most distinct kind names whose defaults a client caches.
KIND_CACHE_SIZE = 256
#: Role name chain workers heartbeat with.
CHAIN_ROLE = "chain"
#: Most connections an AsyncHookBus opens for sending (the reader has its own one).
ASYNC_MAX_CONNECTIONS = 32
#: How long the async inbox reader blocks per XREAD, in ms (only bounds shutdown latency).
INBOX_BLOCK_MS = 1_000
#: Socket timeout of the inbox reader's blocking read, in seconds.
INBOX_READ_TIMEOUT_S = INBOX_BLOCK_MS / 1000 + 5.0
#: Entries read per XREAD of the inbox.
INBOX_READ_COUNT = 1_000
#: Backoff of the inbox reader after a Redis error, in seconds (doubled up to the cap).
INBOX_BACKOFF_MIN_S = 0.05
INBOX_BACKOFF_MAX_S = 1.0

_REDIS_ERRORS: tuple[type[BaseException], ...] = (
    redis.exceptions.RedisError,
    ConnectionError,
    OSError,
)


def _settings_for(url: str | None, namespace: str | None, settings: Settings | None) -> Settings:
    if settings is not None:
        if url is None and namespace is None:
            return settings
        import msgspec

        changes: dict[str, Any] = {}
        if url is not None:
            changes["redis_url"] = url
        if namespace is not None:
            changes["namespace"] = namespace
        return msgspec.structs.replace(settings, **changes)
    overrides = {"redis_url": url, "namespace": namespace}
    return load_settings(overrides=overrides).settings


def _alive_from_heartbeats(raw: dict[bytes, bytes], dead_after_ms: int) -> bool:
    """True when some chain worker's heartbeat is recent (inline parse: no worker imports)."""
    now = now_ms()
    for value in raw.values():
        try:
            data = json.loads(value)
        except (ValueError, UnicodeDecodeError):
            continue
        if (
            isinstance(data, dict)
            and data.get("role") == CHAIN_ROLE
            and isinstance(data.get("last_ms"), int)
            and now - data["last_ms"] < dead_after_ms
        ):
            return True
    return False


class _Liveness:
    """A cached answer to "is any chain worker alive?" so it costs nothing per request."""

    def __init__(self) -> None:
        self.alive: bool | None = None
        self.until = 0.0

    def fresh(self) -> bool | None:
        return self.alive if time.monotonic() < self.until else None

    def store(self, alive: bool) -> None:
        self.alive = alive
        ttl = LIVENESS_CACHE_ALIVE_S if alive else LIVENESS_CACHE_DEAD_S
        self.until = time.monotonic() + ttl


class _Base:
    """What both clients share: settings, keys, catalogue, policy decisions."""

    settings: Settings
    keys: Keys
    catalogue: Catalogue
    url: str

    def _init_common(self, settings: Settings) -> None:
        self.settings = settings
        self.keys = Keys.for_namespace(settings.namespace)
        self.catalogue = settings.catalogue()
        self.url = check_url(settings.effective_redis_url)
        self._liveness = _Liveness()
        # per kind name as given: its spec, default deadline and policy (config lookups
        # normalise names; not something to repeat per request)
        self._kinds: dict[str, tuple[KindSpec, int, Policy]] = {}

    def _prepare(
        self,
        event: Event,
        deadline_ms: int | None,
        on_timeout: Policy | None,
        reply_to: str | None,
    ) -> reqrep.PreparedRequest:
        known = self._kinds.get(event.kind)
        if known is None:
            spec = self.catalogue.resolve(event.kind)
            known = (
                spec,
                self.settings.deadline_ms(spec.kind),
                self.settings.on_timeout_for(spec.kind),
            )
            if len(self._kinds) < KIND_CACHE_SIZE:
                self._kinds[event.kind] = known
        spec, default_deadline_ms, default_policy = known
        return reqrep.prepare_request(
            event,
            spec=spec,
            keys=self.keys,
            budget_ms=deadline_ms,
            default_budget_ms=default_deadline_ms,
            on_timeout=on_timeout,
            default_on_timeout=default_policy,
            reply_to=reply_to,
            max_event_bytes=self.settings.streams.max_event_bytes,
        )

    def _fail(
        self,
        failure: Failure,
        prepared: reqrep.PreparedRequest,
        *,
        strict: bool,
        detail: str = "",
        cause: BaseException | None = None,
    ) -> Decision:
        """The policy decision for ``failure``, or (strict) the matching error."""
        decision = policy_decision(
            failure,
            prepared.on_timeout,
            deadline_ms=prepared.deadline_ms,
            request_id=prepared.event.id,
            detail=detail,
        )
        if strict:
            if failure == "no_worker":
                raise NoWorkerAlive(f"{decision.reason} (strict request {prepared.event.id})")
            if failure in ("refused", "bad_reply") and isinstance(cause, Exception):
                raise cause
            if failure == "redis":
                if isinstance(cause, RedisUnavailable):
                    raise cause
                raise RedisUnavailable(self.url, detail or "connection failed") from cause
            raise RequestTimeout(f"{decision.reason} (strict request {prepared.event.id})")
        # INFO, not WARNING: the caller gets the reason in the decision, and an agent's
        # per-event process without logging config would print warnings on its stderr
        log.info("request %s (%s): %s", prepared.event.id, prepared.event.kind, decision.reason)
        return decision

    def _decode_reply(self, raw: bytes, prepared: reqrep.PreparedRequest, strict: bool) -> Decision:
        try:
            decision = decode(raw, Decision)
        except WireError as exc:
            return self._fail("bad_reply", prepared, strict=strict, detail=str(exc), cause=exc)
        if decision.request_id is None:
            decision.request_id = prepared.event.id
        return decision


class _RequestConnections:
    """Idle connections for requests, made like the shared pool's but never retried.

    Connections are taken and given back without touching the network (a connection
    is opened lazily by its first command, under the request's own connect timeout),
    and redis-py's built-in retry (seconds of backoff) is off: the deadline rules.
    """

    def __init__(self, template: redis.ConnectionPool) -> None:
        kwargs = dict(template.connection_kwargs)
        kwargs["health_check_interval"] = 0
        kwargs["retry"] = Retry(NoBackoff(), 0)
        self._class = template.connection_class
        self._kwargs = kwargs
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def make_connection_for_request(self) -> Any:
        with self._lock:
            if self._pid != os.getpid():  # forked: the parent's sockets are not ours
                self._idle, self._pid = [], os.getpid()
            if self._idle:
                return self._idle.pop()
        return self._class(**self._kwargs)

    def give_back(self, conn: Any) -> None:
        with self._lock:
            self._idle.append(conn)

    def disconnect(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.disconnect()


class HookBus(_Base):
    """Synchronous producer client. Thread-safe; one per process is plenty.

    >>> with HookBus.from_url() as bus:                       # doctest: +SKIP
    ...     d = bus.request(Event(kind="PreToolUse", payload={"tool_name": "Bash"}))
    ...     d.outcome
    'allow'
    """

    def __init__(self, settings: Settings, *, client: redis.Redis | None = None) -> None:
        self._init_common(settings)
        self.client = client if client is not None else connect(self.url)
        # Requests wait on connections of their own pool: their read timeouts are per
        # request, and a connection abandoned at a deadline is dropped, not reused.
        self._pool = _RequestConnections(self.client.connection_pool)
        self._closed = False

    # --- construction -------------------------------------------------------------------

    @classmethod
    def from_url(
        cls,
        url: str | None = None,
        namespace: str | None = None,
        *,
        settings: Settings | None = None,
    ) -> HookBus:
        """A client for ``url`` / ``namespace``; None means "from configuration"
        (``hookbus.toml``, ``HOOKBUS_*``). No I/O happens until the first call."""
        return cls(_settings_for(url, namespace, settings))

    @classmethod
    def from_settings(cls, settings: Settings) -> HookBus:
        return cls(settings)

    # --- blocking requests --------------------------------------------------------------

    def request(
        self,
        event: Event,
        *,
        deadline_ms: int | None = None,
        on_timeout: Policy | None = None,
        strict: bool = False,
    ) -> Decision:
        """Ask the chain for a decision; return by the deadline (+ a few ms), always.

        ``deadline_ms`` defaults to the kind's configured deadline, ``on_timeout`` to the
        kind's policy (``deny`` for PreToolUse and PermissionRequest). Without ``strict``,
        bus trouble returns a ``degraded`` policy decision; with it, raises
        :class:`RequestTimeout`, :class:`NoWorkerAlive` or :class:`RedisUnavailable`.
        """
        prepared = self._prepare(event, deadline_ms, on_timeout, None)
        end = time.monotonic() + prepared.deadline_ms / 1000
        conn = self._pool.make_connection_for_request()
        try:
            alive = self._liveness.fresh()
            if alive is None:
                alive = self._check_liveness(conn, end)
            if not alive:
                return self._fail("no_worker", prepared, strict=strict)
            raw = self._roundtrip(conn, prepared, end)
        except RequestTimeout:
            return self._fail("timeout", prepared, strict=strict)
        except RedisUnavailable as exc:
            return self._fail("redis", prepared, strict=strict, detail=exc.reason, cause=exc)
        except RedisCommandError as exc:
            return self._fail("refused", prepared, strict=strict, detail=str(exc), cause=exc)
        finally:
            self._pool.give_back(conn)
        return self._decode_reply(raw, prepared, strict)

    def workers_alive(self) -> bool:
        """Whether some chain worker heartbeats (cached ~1 s); raises RedisUnavailable."""
        alive = self._liveness.fresh()
        if alive is not None:
            return alive
        conn = self._pool.make_connection_for_request()
        try:
            return self._check_liveness(conn, time.monotonic() + CONNECT_TIMEOUT_S)
        except RequestTimeout as exc:
            raise RedisUnavailable(self.url, "no answer to HGETALL in time") from exc
        finally:
            self._pool.give_back(conn)

    def _time_left(self, end: float) -> float:
        left = end - time.monotonic()
        if left <= 0:
            raise RequestTimeout("deadline passed")
        return left

    def _call(self, conn: Any, end: float, *commands: tuple[Any, ...]) -> list[Any]:
        """Send ``commands`` in one write and read their replies, all before ``end``.

        On a timeout the connection is dropped (redis-py disconnects on read errors), so
        a reply still in flight cannot land on the next request of this connection.
        """
        try:
            conn.socket_connect_timeout = min(self._time_left(end), CONNECT_TIMEOUT_S)
            conn.send_packed_command(
                [b"".join(reqrep.pack_command(*command) for command in commands)],
                check_health=False,
            )
            replies = []
            for _ in commands:
                try:
                    replies.append(conn.read_response(timeout=self._time_left(end)))
                except redis.exceptions.ResponseError as exc:
                    conn.disconnect()  # later replies of this batch are still unread
                    raise RedisCommandError(f"Redis refused a request command: {exc}") from exc
            return replies
        except redis.exceptions.TimeoutError as exc:
            conn.disconnect()
            raise RequestTimeout("no reply before the deadline") from exc
        except RequestTimeout:
            conn.disconnect()
            raise
        except _REDIS_ERRORS as exc:
            conn.disconnect()
            error = translate_error(exc, self.url)
            if isinstance(error, RedisUnavailable):
                raise error from exc
            raise RedisUnavailable(self.url, str(exc)) from exc

    def _check_liveness(self, conn: Any, end: float) -> bool:
        (raw,) = self._call(conn, end, ("HGETALL", self.keys.workers))
        pairs = dict(zip(raw[::2], raw[1::2], strict=True)) if isinstance(raw, list) else raw
        alive = _alive_from_heartbeats(pairs, self.settings.workers.dead_after_ms)
        self._liveness.store(alive)
        return alive

    def _roundtrip(self, conn: Any, prepared: reqrep.PreparedRequest, end: float) -> bytes:
        left = self._time_left(end)
        reply_key = prepared.event.reply_to
        _, popped = self._call(
            conn,
            end,
            (
                "XADD",
                self.keys.requests,
                "MAXLEN",
                "~",
                self.settings.streams.requests_maxlen,
                "*",
                reqrep.REQUEST_FIELD,
                prepared.data,
            ),
            ("BLPOP", reply_key, reqrep.blpop_timeout_s(left)),
        )
        if popped is None:  # cannot happen: the server timeout is past the deadline
            raise RequestTimeout("BLPOP returned nothing")
        value: bytes = popped[1]
        return value

    # --- non-blocking events ------------------------------------------------------------

    def publish(self, event: Event) -> str:
        """Append a non-blocking event to the event log; returns its stream entry id."""
        from hookbus.bus import eventlog

        return eventlog.publish(self.client, self.settings, event)

    def publish_many(self, events: Iterable[Event]) -> list[str]:
        """Append several events in one pipeline."""
        from hookbus.bus import eventlog

        return eventlog.publish_many(self.client, self.settings, list(events))

    # --- lifecycle ----------------------------------------------------------------------

    def close(self) -> None:
        """Drop this client's request connections (the shared pool stays for others)."""
        if not self._closed:
            self._closed = True
            self._pool.disconnect()

    def __enter__(self) -> HookBus:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncHookBus(_Base):
    """asyncio producer client: many concurrent requests over a bounded set of connections.

    Replies come to one inbox stream per client (``hookbus:{ns}:inbox:<producer id>``), read
    by one reader task that hands each decision to the waiting request by id. Use one client
    per event loop (asyncio connections cannot cross loops).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        client: redis.asyncio.Redis | None = None,
        producer_id: str | None = None,
        max_connections: int = ASYNC_MAX_CONNECTIONS,
    ) -> None:
        self._init_common(settings)
        if client is None:
            pool = redis.asyncio.BlockingConnectionPool.from_url(
                self.url,
                protocol=2,
                max_connections=max_connections,
                socket_connect_timeout=CONNECT_TIMEOUT_S,
                socket_keepalive=True,
                timeout=None,
            )
            client = redis.asyncio.Redis.from_pool(pool)  # owns (and closes) the pool
            self._owns_client = True
        else:
            self._owns_client = False
        self.client = client
        self.producer_id = producer_id or new_id()
        self.inbox = self.keys.inbox(self.producer_id)
        self._waiting: dict[bytes, asyncio.Future[bytes]] = {}
        self._reader: asyncio.Task[None] | None = None
        self._reader_client: redis.asyncio.Redis | None = None
        self._last_id = b"0-0"
        self._outbox: list[tuple[bytes, asyncio.Future[None]]] = []
        # XADD <requests> MAXLEN ~ <n> * e: every request's command up to its data
        self._xadd_head = b"*8\r\n" + b"".join(
            reqrep.bulk(arg)
            for arg in (
                "XADD",
                self.keys.requests,
                "MAXLEN",
                "~",
                settings.streams.requests_maxlen,
                "*",
                reqrep.REQUEST_FIELD,
            )
        )
        self._sender: asyncio.Task[None] | None = None
        self._closed = False

    @classmethod
    def from_url(
        cls,
        url: str | None = None,
        namespace: str | None = None,
        *,
        settings: Settings | None = None,
    ) -> AsyncHookBus:
        """A client for ``url`` / ``namespace`` (None: configuration). No I/O yet."""
        return cls(_settings_for(url, namespace, settings))

    @classmethod
    def from_settings(cls, settings: Settings) -> AsyncHookBus:
        return cls(settings)

    # --- blocking requests --------------------------------------------------------------

    async def request(
        self,
        event: Event,
        *,
        deadline_ms: int | None = None,
        on_timeout: Policy | None = None,
        strict: bool = False,
    ) -> Decision:
        """Ask the chain for a decision; return by the deadline, always (see HookBus)."""
        prepared = self._prepare(event, deadline_ms, on_timeout, self.inbox)
        timeout_s = prepared.deadline_ms / 1000
        request_id = prepared.event.id.encode()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bytes] = loop.create_future()
        self._waiting[request_id] = future
        try:
            async with asyncio.timeout(timeout_s):  # no task per request, unlike wait_for
                raw = await self._send_and_wait(prepared, future)
        except TimeoutError:
            return self._fail("timeout", prepared, strict=strict)
        except _NoWorker:
            return self._fail("no_worker", prepared, strict=strict)
        except RedisUnavailable as exc:
            return self._fail("redis", prepared, strict=strict, detail=exc.reason, cause=exc)
        except RedisCommandError as exc:
            return self._fail("refused", prepared, strict=strict, detail=str(exc), cause=exc)
        finally:
            self._waiting.pop(request_id, None)
        return self._decode_reply(raw, prepared, strict)

    async def _send_and_wait(
        self, prepared: reqrep.PreparedRequest, future: asyncio.Future[bytes]
    ) -> bytes:
        try:
            alive = self._liveness.fresh()
            if alive is None:
                alive = await self._check_liveness()
            if not alive:
                raise _NoWorker
            self._ensure_reader()
            await self._enqueue(prepared.data)
        except _REDIS_ERRORS as exc:
            error = translate_error(exc, self.url)
            if isinstance(error, RedisUnavailable | RedisCommandError):
                raise error from exc
            raise RedisUnavailable(self.url, str(exc)) from exc
        return await future

    async def _enqueue(self, data: bytes) -> None:
        """XADD ``data``: requests queued in the same loop turn share one pipeline.

        Auto-pipelining cuts the client's per-request cost (one write and one parse for a
        whole burst) and, unlike a cancelled redis-py call, a request whose deadline passes
        while its XADD is in flight never tears down a connection.
        """
        sent: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # a request abandoned at its deadline no longer awaits this: mark errors as seen
        sent.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._outbox.append((data, sent))
        if self._sender is None or self._sender.done():
            self._sender = asyncio.get_running_loop().create_task(self._send_outbox())
        await sent  # cancelled at the deadline: the sender skips futures already done

    async def _send_outbox(self) -> None:
        """Send every queued XADD in one write on a pooled connection, packed by hand (the
        client's largest per-request cost was redis-py's command packing and pipeline)."""
        pool = self.client.connection_pool
        while self._outbox:
            await asyncio.sleep(0)  # let the other requests of this loop turn queue up
            batch, self._outbox = self._outbox, []
            packed = b"".join(self._xadd_head + reqrep.bulk(data) for data, _ in batch)
            results: list[Any] = []
            try:
                conn = await pool.get_connection()  # type: ignore[no-untyped-call]
                try:
                    await conn.send_packed_command([packed], check_health=False)
                    for _ in batch:
                        try:
                            results.append(await conn.read_response(timeout=CONNECT_TIMEOUT_S))
                        except redis.exceptions.ResponseError as exc:
                            results.append(exc)
                except BaseException:
                    await conn.disconnect()  # replies may be left unread on it
                    raise
                finally:
                    await pool.release(conn)
            except _REDIS_ERRORS as exc:
                for _, sent in batch:
                    if not sent.done():
                        sent.set_exception(exc)
                continue
            for (_, sent), result in zip(batch, results, strict=True):
                if sent.done():
                    continue
                if isinstance(result, BaseException):
                    sent.set_exception(result)
                else:
                    sent.set_result(None)

    async def _check_liveness(self) -> bool:
        raw: Any = await self.client.hgetall(self.keys.workers)
        alive = _alive_from_heartbeats(raw, self.settings.workers.dead_after_ms)
        self._liveness.store(alive)
        return alive

    async def workers_alive(self) -> bool:
        """Whether some chain worker heartbeats (cached ~1 s); raises RedisUnavailable."""
        alive = self._liveness.fresh()
        if alive is not None:
            return alive
        try:
            return await self._check_liveness()
        except _REDIS_ERRORS as exc:
            raise RedisUnavailable(self.url, str(exc)) from exc

    # --- the inbox reader ---------------------------------------------------------------

    def _ensure_reader(self) -> None:
        if self._reader is None or self._reader.done():
            if self._reader_client is None:
                self._reader_client = redis.asyncio.Redis.from_url(
                    self.url,
                    protocol=2,
                    max_connections=1,
                    socket_connect_timeout=CONNECT_TIMEOUT_S,
                    socket_keepalive=True,
                )
            self._reader = asyncio.get_running_loop().create_task(
                self._read_inbox(self._reader_client), name=f"hookbus-inbox-{self.producer_id}"
            )

    async def _read_inbox(self, client: redis.asyncio.Redis) -> None:
        """Hand every decision in the inbox to its waiting request; late ones are dropped.

        Runs on one connection of its own, driven by hand: XREAD BLOCK on the inbox, with an
        XTRIM of what was consumed riding in the same write.
        """
        pool = client.connection_pool
        conn = await pool.get_connection()  # type: ignore[no-untyped-call]
        backoff = INBOX_BACKOFF_MIN_S
        trimmed_id = self._last_id
        try:
            while not self._closed:
                commands = []
                if trimmed_id != self._last_id:
                    commands.append(
                        reqrep.pack_command("XTRIM", self.inbox, "MINID", "~", self._last_id)
                    )
                    trimmed_id = self._last_id
                commands.append(
                    reqrep.pack_command(
                        "XREAD",
                        "COUNT",
                        INBOX_READ_COUNT,
                        "BLOCK",
                        INBOX_BLOCK_MS,
                        "STREAMS",
                        self.inbox,
                        self._last_id,
                    )
                )
                try:
                    await conn.send_packed_command([b"".join(commands)], check_health=False)
                    replies = []
                    for _ in commands:
                        try:
                            replies.append(await conn.read_response(timeout=INBOX_READ_TIMEOUT_S))
                        except redis.exceptions.ResponseError as exc:
                            replies.append(exc)
                    found: Any = replies[-1]
                    if isinstance(found, BaseException):
                        raise found
                    backoff = INBOX_BACKOFF_MIN_S
                except asyncio.CancelledError:
                    raise
                except _REDIS_ERRORS as exc:
                    log.debug("inbox reader: %s; retrying in %.2f s", exc, backoff)
                    await conn.disconnect()
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, INBOX_BACKOFF_MAX_S)
                    continue
                if found:
                    self._deliver(found[0][1])
        finally:
            await conn.disconnect()
            await pool.release(conn)

    def _deliver(self, entries: list[Any]) -> None:
        """Resolve the waiting requests of raw inbox entries ``[id, [field, value, ...]]``."""
        waiting = self._waiting
        for entry_id, flat in entries:
            self._last_id = entry_id
            if not flat:
                continue
            fields = dict(zip(flat[::2], flat[1::2], strict=False))
            future = waiting.get(fields.get(reqrep.INBOX_ID_FIELD, b""))
            if future is not None and not future.done():
                future.set_result(fields.get(reqrep.INBOX_DECISION_FIELD, b""))

    # --- non-blocking events ------------------------------------------------------------

    async def publish(self, event: Event) -> str:
        """Append a non-blocking event to the event log; returns its stream entry id."""
        from hookbus.bus import eventlog

        return await eventlog.apublish(self.client, self.settings, event)

    async def publish_many(self, events: Iterable[Event]) -> list[str]:
        """Append several events in one pipeline."""
        from hookbus.bus import eventlog

        return await eventlog.apublish_many(self.client, self.settings, list(events))

    # --- lifecycle ----------------------------------------------------------------------

    async def aclose(self) -> None:
        """Stop the reader, delete the inbox, close connections this client opened."""
        if self._closed:
            return
        self._closed = True
        sender, self._sender = self._sender, None
        if sender is not None and not sender.done():
            with contextlib.suppress(asyncio.CancelledError, TimeoutError, *_REDIS_ERRORS):
                await asyncio.wait_for(sender, 1.0)
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, *_REDIS_ERRORS):
                await reader
        if self._reader_client is not None:
            with contextlib.suppress(*_REDIS_ERRORS):
                await self.client.delete(self.inbox)
            await self._reader_client.aclose()
            self._reader_client = None
        if self._owns_client:
            await self.client.aclose()

    close = aclose

    async def __aenter__(self) -> AsyncHookBus:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class _NoWorker(Exception):
    """Internal: the heartbeats say no chain worker is alive."""


__all__ = ["AsyncHookBus", "HookBus"]
