"""The asyncio producer client, :class:`AsyncHookBus`: many concurrent requests over a
bounded set of connections.

Same promise as :class:`~hookbus.producers.sync_client.HookBus`: a decision by the
deadline, always. ``asyncio.timeout`` enforces each deadline around everything the request
awaits (liveness check, connecting, sending, the reply), so a refused, reset, stalled or
slow Redis yields the policy decision in time. Requests queued in the same loop turn share
one hand-packed XADD write (:mod:`hookbus.producers.async_outbox`); replies come back through
the client's inbox stream (:mod:`hookbus.producers.async_inbox`), matched by the call's
fresh request id, and a reply that carries another request id is dropped.

This module imports redis-py (``redis.asyncio``); ``from hookbus import HookBus`` does not
import it.

Each partition is one :class:`AsyncLane`: request sender, reply inbox and its reader. With
``partitions = 1`` on a single server the client has one lane (partition 0, today's
keys). With more, a request goes to the lane of its session's partition
(:func:`hookbus.bus.keys.partition_of`): its XADD to that partition's request stream and
its reply to this client's inbox *in the same hash slot* (``{ns:p}``), so the worker's reply
script touches one slot and, on a Redis Cluster, one master. Lanes other than 0 are made on
first use, each with connections of its own to the master serving its slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import redis.asyncio
import redis.exceptions

from hookbus.bus import reqrep
from hookbus.bus.connection import CONNECT_TIMEOUT_S, no_handshake_kwargs, translate_error
from hookbus.bus.keys import Keys, partition_of
from hookbus.bus.policy.backlog import BacklogGate
from hookbus.bus.settings.loader import Settings
from hookbus.bus.tracing.producer import traced_apublish, traced_arequest
from hookbus.bus.wire import Decision, Event, new_id
from hookbus.errors import EventTooLarge, RedisCommandError, RedisUnavailable, WireError
from hookbus.producers.async_inbox import IO_ERRORS, InboxReader
from hookbus.producers.async_outbox import RequestOutbox
from hookbus.producers.client_base import (
    PARKED_PROBE_S,
    PUBLISH_TIMEOUT_S,
    STREAM_RETRY_S,
    OnParked,
    Policy,
    ProducerBase,
    parked_wait_s,
    settings_for,
    stream_unwritable,
)
from hookbus.producers.inbox_ttl import InboxTTL

if TYPE_CHECKING:
    from types import TracebackType

    from hookbus.producers.agent_session import AsyncAgentSession

__all__ = ["AsyncHookBus"]


class AsyncLane:
    """The outbox, inbox and inbox reader of one partition."""

    def __init__(
        self,
        keys: Keys,
        client: redis.asyncio.Redis,
        *,
        url: str,
        node_url: str,
        routing: dict[str, Any],
        producer_id: str,
        waiting: dict[bytes, asyncio.Future[Decision | WireError]],
        owns_client: bool,
        gate: BacklogGate,
    ) -> None:
        self.keys = keys
        self.client = client
        self.owns_client = owns_client
        self.inbox = keys.inbox(producer_id)
        self.inbox_ttl = InboxTTL(self.inbox)
        self.reader = InboxReader(
            node_url,
            self.inbox,
            waiting,
            routing=routing,
            name=f"hookbus-inbox-{producer_id}-{keys.partition}",
            inbox_ttl=self.inbox_ttl,
        )
        # XADD <requests> * e: every request's command up to its data (no MAXLEN: the chain
        # workers trim what they took; the gate refuses while the stream holds its limit)
        xadd_head = reqrep.request_xadd_head(keys.requests)
        self.gate = gate
        self.outbox = RequestOutbox(client, url, xadd_head, self.inbox_ttl, gate)


#: Most connections an AsyncHookBus opens for sending (the reader has its own one).
ASYNC_MAX_CONNECTIONS = 32
#: How long closing waits for XADDs still queued, in seconds.
CLOSE_FLUSH_S = 1.0

log = logging.getLogger(__name__)


class _NoWorker(Exception):
    """Internal: the heartbeats say no chain worker is alive."""


class _BacklogFull(Exception):
    """Internal: the request stream holds its limit (the message says so)."""


class _ApprovalGone(Exception):
    """Internal: a parked request's approval no longer exists in Redis."""


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
            client = _client(self._node_url(0), max_connections, self._routing(0))
            self._owns_client = True
        else:
            self._owns_client = False
        self.client = client
        self.producer_id = producer_id or new_id()
        self._waiting: dict[bytes, asyncio.Future[Decision | WireError]] = {}
        self._max_connections = max_connections
        #: Per partition: its outbox, inbox and inbox reader (:class:`AsyncLane`).
        self._lanes: dict[int, AsyncLane] = {}
        lane = self._new_lane(0, self.client, owns_client=False)
        self.inbox = lane.inbox
        self._closed = False
        #: the liveness check on its way, shared by every request that finds the cached
        #: answer stale meanwhile (one check per staleness, not one per request in flight)
        self._liveness_check: asyncio.Future[bool] | None = None

    def _node_url(self, partition: int) -> str:
        """The URL of the server holding a partition (on a cluster: the master of its
        slot, found with one blocking look-up per partition and process)."""
        from hookbus.bus.connection import is_cluster_url, node_url

        if not is_cluster_url(self.url):
            return self.url
        return node_url(self.url, Keys.for_partition(self.settings.namespace, partition).requests)

    def _routing(self, partition: int) -> dict[str, Any]:
        """Pool options that make a partition's connections follow its slot on a cluster
        (a failover moves them; nothing on a single server)."""
        from hookbus.bus.connection import routed_kwargs

        slot_key = Keys.for_partition(self.settings.namespace, partition).requests
        return routed_kwargs(self.url, slot_key, asyncio=True)

    def _new_lane(
        self, partition: int, client: redis.asyncio.Redis, *, owns_client: bool
    ) -> AsyncLane:
        lane = AsyncLane(
            Keys.for_partition(self.settings.namespace, partition),
            client,
            url=self.url,
            node_url=self._node_url(partition),
            routing=self._routing(partition),
            producer_id=self.producer_id,
            waiting=self._waiting,
            gate=self._request_gate(Keys.for_partition(self.settings.namespace, partition)),
            owns_client=owns_client,
        )
        self._lanes[partition] = lane
        return lane

    def _lane(self, session_id: str | None) -> AsyncLane:
        """The lane of a session's partition (made on first use)."""
        partition = partition_of(session_id, self.settings.partitions)
        lane = self._lanes.get(partition)
        if lane is None:
            url = self._node_url(partition)
            # on a cluster each partition's connections follow their own slot
            same_server = url == self._node_url(0) and not self._routing(partition)
            client = (
                self.client
                if same_server
                else _client(url, self._max_connections, self._routing(partition))
            )
            lane = self._new_lane(partition, client, owns_client=not same_server)
        return lane

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

    @traced_arequest
    async def request(
        self,
        event: Event,
        *,
        deadline_ms: int | None = None,
        on_timeout: Policy | None = None,
        strict: bool = False,
        on_parked: OnParked | None = None,
    ) -> Decision:
        """Ask the chain for a decision; return by the deadline, always (see HookBus).
        A request parked for an operator waits on, up to its approval's ``wait_s``."""
        lane = self._lane(event.session_id)
        try:
            prepared = self._prepare(event, deadline_ms, on_timeout, lane.inbox)
        except EventTooLarge as exc:
            return self._oversized(event, exc, strict=strict)
        # workers that predate request ids answer under the event's id (see reply_matches)
        ids = {prepared.request_id.encode(), prepared.event.id.encode()}
        parked: Decision | None = None
        try:
            async with asyncio.timeout(prepared.deadline_ms / 1000) as scope:  # no task
                reply = self._expect(ids)  # before sending: the reply may beat the XADD's ack
                await self._send(lane, prepared)
                while True:
                    answer = await (reply if parked is None else self._parked(reply, parked))
                    decision = self._accept_reply(answer, prepared, strict)
                    if decision is not None and decision.parked and parked is None:
                        # parked for an operator: the same inbox brings the final answer
                        parked = decision
                        reply = self._expect(ids, lane.reader.after_parked(ids))
                        loop = asyncio.get_running_loop()
                        scope.reschedule(loop.time() + parked_wait_s(decision))
                        if on_parked is not None:
                            on_parked(decision)
                        continue
                    if decision is not None and not decision.parked:
                        return decision
                    reply = self._expect(ids)
        except _ApprovalGone:
            assert parked is not None
            return self._no_operator(prepared, parked, "approval_gone")
        except TimeoutError:
            if parked is not None:
                return self._no_operator(prepared, parked)
            lane.inbox_ttl.forget()  # in case the inbox is gone (evicted): renew it next
            return self._fail("timeout", prepared, strict=strict)
        except _NoWorker:
            return self._fail("no_worker", prepared, strict=strict)
        except _BacklogFull as exc:
            return self._fail("backlog", prepared, strict=strict, detail=str(exc))
        except RedisUnavailable as exc:
            return self._fail("redis", prepared, strict=strict, detail=exc.reason, cause=exc)
        except RedisCommandError as exc:
            return self._fail("refused", prepared, strict=strict, detail=str(exc), cause=exc)
        finally:
            for key in ids:
                self._waiting.pop(key, None)
            if parked is not None:
                lane.reader.forget_parked(ids)

    async def _parked(
        self, reply: asyncio.Future[Decision | WireError], parked: Decision
    ) -> Decision | WireError:
        """The next reply of a parked request, checking each second with no answer that
        its approval still exists (raises :class:`_ApprovalGone` when it does not)."""
        key = self._approval_key(parked)
        while key is not None:
            done, _ = await asyncio.wait({reply}, timeout=PARKED_PROBE_S)
            if done:
                break
            try:
                there = await self.client.exists(key)
            except redis.exceptions.ResponseError as exc:  # a user that may not look
                log.warning("cannot check that a parked request's approval exists: %s", exc)
                break
            except IO_ERRORS:
                continue  # Redis away: its return tells
            if not there:
                raise _ApprovalGone
        return await reply

    def _expect(
        self, ids: set[bytes], early: Decision | WireError | None = None
    ) -> asyncio.Future[Decision | WireError]:
        """A future the inbox reader resolves with the next entry filed under one of ``ids``
        (already resolved with ``early``: an entry that came before anyone waited for it)."""
        future: asyncio.Future[Decision | WireError] = asyncio.get_running_loop().create_future()
        if early is not None:
            future.set_result(early)
            return future
        for key in ids:
            self._waiting[key] = future
        return future

    async def _send(self, lane: AsyncLane, prepared: reqrep.PreparedRequest) -> None:
        """Check liveness, make sure the inbox is read, and XADD the request."""
        try:
            alive = self._liveness.fresh()
            if alive is None:
                alive = await self._shared_liveness_check()
            if not alive:
                raise _NoWorker
            full = lane.gate.refusal()
            if full is not None:
                raise _BacklogFull(full)
            lane.reader.ensure_running()
            while True:
                try:
                    await lane.outbox.send(prepared.data, prepared.deadline_ms)
                    return
                except redis.exceptions.ResponseError as exc:
                    # a poisoned stream is recovered by the fleet's warden: try again
                    if not stream_unwritable(exc):
                        raise
                    await asyncio.sleep(STREAM_RETRY_S)  # the request's timeout bounds this
        except IO_ERRORS as exc:
            error = translate_error(exc, self.url)
            if isinstance(error, RedisUnavailable | RedisCommandError):
                raise error from exc
            raise self.unavailable(str(exc)) from exc

    async def _shared_liveness_check(self) -> bool:
        """:meth:`_check_liveness`, once for every request that needs it meanwhile: a stale
        cache at a few thousand requests/s would otherwise send a check per request in
        flight. Shielded, so one caller's cancellation (its deadline) leaves the check to
        the others."""
        check = self._liveness_check
        if check is None or check.done():
            check = self._liveness_check = asyncio.ensure_future(self._check_liveness())
            # its outcome is read even when every waiter was cancelled
            check.add_done_callback(lambda done: done.cancelled() or done.exception())
        return await asyncio.shield(check)

    async def _check_liveness(self) -> bool:
        """Read the heartbeats, and whether Redis refuses writes (see HookBus)."""
        from hookbus.bus.connection import probe_command

        async with self.client.pipeline(transaction=False) as pipe:
            pipe.hgetall(self.keys.workers)
            pipe.time()
            pipe.get(self.fail_policy_key)
            pipe.execute_command(*probe_command(self._write_probe))
            raw, now, policy, probe = await pipe.execute(raise_on_error=False)
        for reply in (raw, now):
            if isinstance(reply, Exception):
                raise reply
        if not isinstance(policy, BaseException):  # a user without it keeps the last known
            self.fail_policy.update(policy)
        self._raise_refusal(probe)
        return self._liveness.judge(raw, now, self.settings.workers.dead_after_ms)

    async def workers_alive(self) -> bool:
        """Whether some chain worker heartbeats (cached ~1 s); raises RedisUnavailable."""
        alive = self._liveness.fresh()
        if alive is not None:
            return alive
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                return await self._shared_liveness_check()
        except TimeoutError as exc:
            raise self.unavailable("no answer to HGETALL in time") from exc
        except IO_ERRORS as exc:
            raise self.unavailable(str(exc)) from exc

    # --- non-blocking events ------------------------------------------------------------

    def session(
        self, agent_id: str, session_id: str | None = None, **options: Any
    ) -> AsyncAgentSession:
        """An agent session on this bus: ``before_tool``, ``after_tool``, ``prompt``,
        ``stop``, ``end`` and the ``guarded`` decorator (see
        :mod:`hookbus.producers.agent_session`)."""
        from hookbus.producers.agent_session import AsyncAgentSession

        return AsyncAgentSession(self, agent_id, session_id, **options)

    @traced_apublish
    async def publish(self, event: Event) -> str:
        """Append a non-blocking event to the event log; returns the event's id.
        Raises :class:`RedisUnavailable` when Redis does not answer within
        ``publish_timeout_s`` (1 s by default)."""
        return (await self.publish_many([event]))[0]

    async def publish_many(self, events: Iterable[Event]) -> list[str]:
        """Append several events in one pipeline (with partitions on a Redis Cluster, one
        per master), within one publish timeout; returns their event ids."""
        from hookbus.bus import eventlog

        batch = list(events)
        for event in batch:
            self._check_published(event)
        # each event to its session's partition (on a cluster through the client of the
        # partition's lane, one pipeline per master); one publish timeout for them all
        groups: dict[int, tuple[redis.asyncio.Redis, list[Event]]] = {}
        for event in batch:
            client = self._lane(event.session_id).client
            groups.setdefault(id(client), (client, []))[1].append(event)
        try:
            async with asyncio.timeout(self.publish_timeout_s):
                for client, events_here in groups.values():
                    await eventlog.apublish_many(
                        client, self.settings, events_here, gates=self._gates
                    )
                return [event.id for event in batch]
        except TimeoutError as exc:
            raise self.unavailable(
                f"no answer to XADD within {self.publish_timeout_s:g} s"
            ) from exc
        except RedisUnavailable as exc:  # say which namespace too
            raise self.unavailable(exc.reason) from exc

    # --- lifecycle ----------------------------------------------------------------------

    async def aclose(self) -> None:
        """Stop the reader, delete the inbox, close connections this client opened."""
        if self._closed:
            return
        self._closed = True
        for lane in self._lanes.values():
            await lane.outbox.finish(CLOSE_FLUSH_S)
            if lane.reader.started:
                await lane.reader.stop()
                with contextlib.suppress(TimeoutError, *IO_ERRORS):
                    async with asyncio.timeout(CONNECT_TIMEOUT_S):
                        await lane.client.delete(lane.inbox)
            if lane.owns_client:
                await lane.client.aclose()
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


def _client(url: str, max_connections: int, routing: dict[str, Any]) -> redis.asyncio.Redis:
    """A client owning a pool of its own on ``url`` (a plain server or one master; with
    ``routing``, whichever master serves the slot now)."""
    pool = redis.asyncio.BlockingConnectionPool.from_url(
        url,
        protocol=2,
        max_connections=max_connections,
        socket_connect_timeout=CONNECT_TIMEOUT_S,
        socket_keepalive=True,
        timeout=None,
        **no_handshake_kwargs(),
        **routing,
    )
    return redis.asyncio.Redis.from_pool(pool)  # owns (and closes) the pool
