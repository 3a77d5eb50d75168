"""The asyncio producer client, :class:`AsyncHookBus`: many concurrent requests over a
bounded set of connections.

Same promise as :class:`~hookbus.producers.sync_client.HookBus`: a decision by the
deadline, always. ``asyncio.timeout`` enforces each deadline around everything the request
awaits (liveness check, connecting, sending, the reply), so a refused, reset, stalled or
slow Redis yields the policy decision in time. Requests queued in the same loop turn share
one hand-packed XADD write (:meth:`AsyncHookBus._send_outbox`); replies come back through
the client's inbox stream (:mod:`hookbus.producers.async_inbox`), matched by the call's
fresh request id, and a reply that carries another request id is dropped.

This module imports redis-py (``redis.asyncio``); ``from hookbus import HookBus`` does not
import it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import redis.asyncio
import redis.exceptions

from hookbus.bus import reqrep
from hookbus.bus.connection import CONNECT_TIMEOUT_S, no_handshake_kwargs, translate_error
from hookbus.bus.settings import Settings
from hookbus.bus.wire import Decision, Event, new_id
from hookbus.errors import RedisCommandError, RedisUnavailable
from hookbus.producers.async_inbox import IO_ERRORS, InboxReader
from hookbus.producers.client_base import PUBLISH_TIMEOUT_S, Policy, ProducerBase, settings_for

if TYPE_CHECKING:
    from types import TracebackType

#: Most connections an AsyncHookBus opens for sending (the reader has its own one).
ASYNC_MAX_CONNECTIONS = 32


class _NoWorker(Exception):
    """Internal: the heartbeats say no chain worker is alive."""


class AsyncHookBus(ProducerBase):
    """asyncio producer client. Use one client per event loop (asyncio connections cannot
    cross loops)."""

    def __init__(
        self,
        settings: Settings,
        *,
        client: redis.asyncio.Redis | None = None,
        producer_id: str | None = None,
        max_connections: int = ASYNC_MAX_CONNECTIONS,
        publish_timeout_s: float = PUBLISH_TIMEOUT_S,
    ) -> None:
        self._init_common(settings, publish_timeout_s)
        if client is None:
            pool = redis.asyncio.BlockingConnectionPool.from_url(
                self.url,
                protocol=2,
                max_connections=max_connections,
                socket_connect_timeout=CONNECT_TIMEOUT_S,
                socket_keepalive=True,
                timeout=None,
                **no_handshake_kwargs(),
            )
            client = redis.asyncio.Redis.from_pool(pool)  # owns (and closes) the pool
            self._owns_client = True
        else:
            self._owns_client = False
        self.client = client
        self.producer_id = producer_id or new_id()
        self.inbox = self.keys.inbox(self.producer_id)
        self._waiting: dict[bytes, asyncio.Future[bytes]] = {}
        self._reader = InboxReader(
            self.url, self.inbox, self._waiting, name=f"hookbus-inbox-{self.producer_id}"
        )
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
        return cls(settings_for(url, namespace, settings))

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
        # workers that predate request ids answer under the event's id (see reply_matches)
        ids = {prepared.request_id.encode(), prepared.event.id.encode()}
        try:
            async with asyncio.timeout(prepared.deadline_ms / 1000):  # no task per request
                reply = self._expect(ids)  # before sending: the reply may beat the XADD's ack
                await self._send(prepared)
                while True:
                    decision = self._accept_reply(await reply, prepared, strict)
                    if decision is not None:
                        return decision
                    reply = self._expect(ids)
        except TimeoutError:
            return self._fail("timeout", prepared, strict=strict)
        except _NoWorker:
            return self._fail("no_worker", prepared, strict=strict)
        except RedisUnavailable as exc:
            return self._fail("redis", prepared, strict=strict, detail=exc.reason, cause=exc)
        except RedisCommandError as exc:
            return self._fail("refused", prepared, strict=strict, detail=str(exc), cause=exc)
        finally:
            for key in ids:
                self._waiting.pop(key, None)

    def _expect(self, ids: set[bytes]) -> asyncio.Future[bytes]:
        """A future the inbox reader resolves with the next entry filed under one of ``ids``."""
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        for key in ids:
            self._waiting[key] = future
        return future

    async def _send(self, prepared: reqrep.PreparedRequest) -> None:
        """Check liveness, make sure the inbox is read, and XADD the request."""
        try:
            alive = self._liveness.fresh()
            if alive is None:
                alive = await self._check_liveness()
            if not alive:
                raise _NoWorker
            self._reader.ensure_running()
            await self._enqueue(prepared.data)
        except IO_ERRORS as exc:
            error = translate_error(exc, self.url)
            if isinstance(error, RedisUnavailable | RedisCommandError):
                raise error from exc
            raise RedisUnavailable(self.url, str(exc)) from exc

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
        client's largest per-request cost was redis-py's command packing and pipeline).

        A batch's connect, write and reads share one bound, so a stalled server never pins
        the sender: later batches go out on a fresh connection once it gives up.
        """
        while self._outbox:
            await asyncio.sleep(0)  # let the other requests of this loop turn queue up
            batch, self._outbox = self._outbox, []
            packed = b"".join(self._xadd_head + reqrep.bulk(data) for data, _ in batch)
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT_S):
                    results = await self._write_batch(packed, len(batch))
            except TimeoutError:
                _fail_batch(batch, _stalled(self.url))
                continue
            except IO_ERRORS as exc:
                _fail_batch(batch, exc)
                continue
            for (_, sent), result in zip(batch, results, strict=True):
                if sent.done():
                    continue
                if isinstance(result, BaseException):
                    sent.set_exception(result)
                else:
                    sent.set_result(None)

    async def _write_batch(self, packed: bytes, count: int) -> list[Any]:
        pool = self.client.connection_pool
        conn = await pool.get_connection()  # type: ignore[no-untyped-call]
        try:
            await conn.send_packed_command([packed], check_health=False)
            results: list[Any] = []
            for _ in range(count):
                try:
                    results.append(await conn.read_response())
                except redis.exceptions.ResponseError as exc:
                    results.append(exc)
            return results
        except BaseException:
            await conn.disconnect()  # replies may be left unread on it
            raise
        finally:
            await pool.release(conn)

    async def _check_liveness(self) -> bool:
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.hgetall(self.keys.workers)
            pipe.time()
            raw, now = await pipe.execute()
        return self._liveness.judge(raw, now, self.settings.workers.dead_after_ms)

    async def workers_alive(self) -> bool:
        """Whether some chain worker heartbeats (cached ~1 s); raises RedisUnavailable."""
        alive = self._liveness.fresh()
        if alive is not None:
            return alive
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                return await self._check_liveness()
        except TimeoutError as exc:
            raise RedisUnavailable(self.url, "no answer to HGETALL in time") from exc
        except IO_ERRORS as exc:
            raise RedisUnavailable(self.url, str(exc)) from exc

    # --- non-blocking events ------------------------------------------------------------

    async def publish(self, event: Event) -> str:
        """Append a non-blocking event to the event log; returns its stream entry id.
        Raises :class:`RedisUnavailable` when Redis does not answer within
        ``publish_timeout_s`` (1 s by default)."""
        return (await self.publish_many([event]))[0]

    async def publish_many(self, events: Iterable[Event]) -> list[str]:
        """Append several events in one pipeline, within one publish timeout."""
        from hookbus.bus import eventlog

        batch = list(events)
        for event in batch:
            self._check_published(event)
        try:
            async with asyncio.timeout(self.publish_timeout_s):
                if len(batch) == 1:
                    return [await eventlog.apublish(self.client, self.settings, batch[0])]
                return await eventlog.apublish_many(self.client, self.settings, batch)
        except TimeoutError as exc:
            raise RedisUnavailable(
                self.url, f"no answer to XADD within {self.publish_timeout_s:g} s"
            ) from exc

    # --- lifecycle ----------------------------------------------------------------------

    async def aclose(self) -> None:
        """Stop the reader, delete the inbox, close connections this client opened."""
        if self._closed:
            return
        self._closed = True
        sender, self._sender = self._sender, None
        if sender is not None and not sender.done():
            with contextlib.suppress(asyncio.CancelledError, TimeoutError, *IO_ERRORS):
                await asyncio.wait_for(sender, 1.0)
        if self._reader.started:
            await self._reader.stop()
            with contextlib.suppress(TimeoutError, *IO_ERRORS):
                async with asyncio.timeout(CONNECT_TIMEOUT_S):
                    await self.client.delete(self.inbox)
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


def _fail_batch(batch: list[tuple[bytes, asyncio.Future[None]]], error: BaseException) -> None:
    for _, sent in batch:
        if not sent.done():
            sent.set_exception(error)


def _stalled(url: str) -> RedisUnavailable:
    return RedisUnavailable(url, f"no answer to XADD within {CONNECT_TIMEOUT_S:g} s")


__all__ = ["AsyncHookBus"]
