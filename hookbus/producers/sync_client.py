"""The synchronous producer client, :class:`HookBus`.

An agent runtime calls ``request(event)`` on every blocking lifecycle event and gets a
:class:`Decision` back before the deadline, always: from the fleet's hook chain when a chain
worker answers in time, else from the failure policy (``degraded=True``, with a reason).
Bus trouble (no worker, Redis refused, reset, stalled or slow) never raises unless
``strict=True``; caller mistakes (unknown kind, observe-only kind, invalid payload, oversize
event) always do.

Transport, chosen by measurement (``docs/blocking.md`` and ``docs/scaling.md`` have the
figures): XADD + XREAD BLOCK pipelined on a dedicated connection (one round trip), the reply
read with a socket timeout equal to the time left (:mod:`hookbus.producers.sync_connections`).
Each connection has a reply inbox stream of its own that the producer keeps alive, so a
worker answers with a single XADD (no reply key created, expired and deleted per request;
``docs/scaling.md`` counts the commands). Redis's own block timeout is set past the
client's deadline and never decides; a connection whose read timed out is dropped. A reply
that carries another request id (a late answer to an earlier call on the same connection)
is dropped and the wait goes on.

Importing this module imports no redis-py: that happens when a client is built.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from hookbus.bus import reqrep, resp
from hookbus.bus.settings.loader import Settings
from hookbus.bus.tracing.producer import traced_publish, traced_request
from hookbus.bus.wire import Decision, Event, new_id
from hookbus.errors import (
    EventTooLarge,
    RedisCommandError,
    RedisUnavailable,
    RequestTimeout,
    WireError,
)
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
    time_left,
)
from hookbus.producers.inbox_ttl import renewal_failure

if TYPE_CHECKING:
    from types import TracebackType

    import redis

    from hookbus.producers.agent_session import AgentSession
    from hookbus.producers.sync_connections import ConnectionInbox, Lane, RequestConnections

__all__ = ["HookBus"]


log = logging.getLogger(__name__)

#: Pause between tries to read a parked request's answer while Redis is away, in seconds.
PARKED_RETRY_S = 0.5


class HookBus(ProducerBase):
    """Synchronous producer client. Thread-safe; one per process is plenty.

    >>> with HookBus.from_url() as bus:                       # doctest: +SKIP
    ...     d = bus.request(Event(kind="PreToolUse", payload={"tool_name": "Bash"}))
    ...     d.outcome
    'allow'
    """

    def __init__(
        self,
        settings: Settings,
        *,
        client: redis.Redis | None = None,
        publish_timeout_s: float = PUBLISH_TIMEOUT_S,
    ) -> None:
        from hookbus.bus.connection import bus_client, is_cluster_url
        from hookbus.producers.sync_connections import Lane, RequestConnections, inbox_of

        self._init_common(settings, publish_timeout_s)
        #: A client on the process's shared pool, for the caller's own commands (on a
        #: cluster: the master of the namespace's own slot).
        self.client = client if client is not None else bus_client(settings)
        # Requests and publishes use connections of their own: their timeouts follow each
        # call's deadline, and a connection abandoned at a deadline is dropped, not reused.
        self._pool: RequestConnections = RequestConnections(self.client.connection_pool, self.url)
        self._producer_id = new_id()
        self._inbox_of = inbox_of
        #: Per partition: its keys, request connections and inbox prefix (each request
        #: connection's reply inbox is the prefix + an id of its own).
        self._lanes: dict[int, Lane] = {
            0: Lane.make(
                self.keys,
                self._pool,
                self.keys.inbox(f"{self._producer_id}."),
            )
        }
        self._closed = False
        #: On a cluster a partition's streams may live on another master than ``{ns}``'s.
        self._on_cluster = is_cluster_url(self.url)

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
        return cls(settings_for(url, namespace, settings))

    @classmethod
    def from_settings(cls, settings: Settings) -> HookBus:
        return cls(settings)

    # --- blocking requests --------------------------------------------------------------

    @traced_request
    def request(
        self,
        event: Event,
        *,
        deadline_ms: int | None = None,
        on_timeout: Policy | None = None,
        strict: bool = False,
        on_parked: OnParked | None = None,
    ) -> Decision:
        """Ask the chain for a decision; return by the deadline (+ a few ms), always.

        ``deadline_ms`` defaults to the kind's configured deadline, ``on_timeout`` to the
        kind's policy (``deny`` for PreToolUse and PermissionRequest). Without ``strict``,
        bus trouble returns a ``degraded`` policy decision; with it, raises
        :class:`RequestTimeout`, :class:`NoWorkerAlive` or :class:`RedisUnavailable`.

        A request a hook parked for an operator (``decision.approval``) keeps waiting past
        the deadline, until an operator decides or its ``wait_s`` passes (then the policy
        answers, degraded); ``on_parked`` is called with the first reply meanwhile.
        """
        lane = self._lane(event.session_id)
        conn = lane.pool.take()
        try:
            inbox = self._inbox_of(conn, lane.inbox_prefix)
            try:
                prepared = self._prepare(event, deadline_ms, on_timeout, inbox.key)
            except EventTooLarge as exc:
                return self._oversized(event, exc, strict=strict)
            end = time.monotonic() + prepared.deadline_ms / 1000
            try:
                alive = self._liveness.fresh()
                if alive is None:
                    alive = self._alive(conn if lane.pool is self._pool else None, end)
                if not alive:
                    return self._fail("no_worker", prepared, strict=strict)
                full = self._request_gate(lane.keys).refusal()
                if full is not None:
                    return self._fail("backlog", prepared, strict=strict, detail=full)
                fields = self._send_until_written(conn, inbox, lane, prepared, end)
                decision = self._decision(fields, prepared, strict)
                while decision is None:  # another call's reply: wait on for ours
                    fields = self._read(lane, conn, inbox, end)
                    decision = self._decision(fields, prepared, strict)
                if decision.parked:
                    return self._await_operator(conn, inbox, lane, prepared, decision, on_parked)
                return decision
            # after a failure the connection takes a new inbox: a late reply to this call
            # then lands where no later call reads (and expires with the old inbox)
            except RequestTimeout:
                conn.hookbus_inbox = None
                return self._fail("timeout", prepared, strict=strict)
            except RedisUnavailable as exc:
                conn.hookbus_inbox = None
                return self._fail("redis", prepared, strict=strict, detail=exc.reason, cause=exc)
            except RedisCommandError as exc:
                conn.hookbus_inbox = None
                return self._fail("refused", prepared, strict=strict, detail=str(exc), cause=exc)
        finally:
            lane.pool.give_back(conn)

    def _await_operator(
        self,
        conn: Any,
        inbox: ConnectionInbox,
        lane: Lane,
        prepared: reqrep.PreparedRequest,
        parked: Decision,
        on_parked: OnParked | None,
    ) -> Decision:
        """Wait on the same inbox for a parked request's final answer (an operator's, or
        the fleet's expiry answer); the policy when neither comes. Redis going away
        meanwhile is waited out: the decision is kept in Redis until it is read."""
        if on_parked is not None:
            on_parked(parked)
        end = time.monotonic() + parked_wait_s(parked)
        probe = self._approval_key(parked)
        while True:
            try:
                if probe is not None and end - time.monotonic() > PARKED_PROBE_S + 1:
                    fields = self._read_for(lane, conn, inbox, PARKED_PROBE_S)
                    if fields is None:  # a second with no answer: is the approval still there?
                        there = self._exists(lane, conn, probe)
                        if there is False:
                            return self._no_operator(prepared, parked, "approval_gone")
                        if there is None:
                            probe = None  # this Redis user may not look: wait without
                        continue
                else:
                    fields = self._read(lane, conn, inbox, end)
                final = self._decision(fields, prepared, strict=False)
                if final is not None and not final.parked:
                    return final
            except RequestTimeout:
                conn.hookbus_inbox = None
                return self._no_operator(prepared, parked)
            except (RedisUnavailable, RedisCommandError) as exc:
                log.info("request %s: waiting for its approval: %s", prepared.request_id, exc)
                time.sleep(min(PARKED_RETRY_S, max(end - time.monotonic(), 0.0)))

    def _lane(self, session_id: str | None) -> Lane:
        """The partition lane of a session (made on first use)."""
        if self.settings.partitions == 1:
            return self._lanes[0]
        from hookbus.bus.keys import partition_of

        partition = partition_of(session_id, self.settings.partitions)
        lane = self._lanes.get(partition)
        if lane is None:
            from hookbus.bus.connection import is_cluster_url, partition_client
            from hookbus.bus.keys import Keys
            from hookbus.producers.sync_connections import Lane, RequestConnections

            keys = Keys.for_partition(self.settings.namespace, partition)
            template = self.client.connection_pool
            if is_cluster_url(self.url):
                template = partition_client(self.settings, partition).connection_pool
            pool = RequestConnections(template, self.url)
            inbox_prefix = keys.inbox(f"{self._producer_id}.")
            lane = Lane.make(keys, pool, inbox_prefix)
            self._lanes[partition] = lane
        return lane

    def _alive(self, conn: Any, end: float) -> bool:
        """:meth:`_check_liveness` on ``conn``, or on a connection of the namespace's own
        slot when ``conn`` is None (a request of another partition, maybe on another node)."""
        if conn is not None:
            return self._check_liveness(conn, end)
        own = self._pool.take()
        try:
            return self._check_liveness(own, end)
        finally:
            self._pool.give_back(own)

    def workers_alive(self) -> bool:
        """Whether some chain worker heartbeats (cached ~1 s); raises RedisUnavailable."""
        from hookbus.bus.connection import CONNECT_TIMEOUT_S

        alive = self._liveness.fresh()
        if alive is not None:
            return alive
        conn = self._pool.take()
        try:
            return self._check_liveness(conn, time.monotonic() + CONNECT_TIMEOUT_S)
        finally:
            self._pool.give_back(conn)

    def _check_liveness(self, conn: Any, end: float) -> bool:
        """Read the heartbeats; a Redis that does not answer in time is unavailable, and
        one that refuses writes (OOM, MISCONF) raises :class:`RedisWritesRefused`: its
        workers cannot beat, so "no worker alive" would name the wrong cause."""
        from hookbus.bus.connection import probe_command

        try:
            raw, now, policy, probe = self._pool.call(
                conn,
                end,
                ("HGETALL", self.keys.workers),
                ("TIME",),
                ("GET", self.fail_policy_key),
                probe_command(self._write_probe),
                optional=2,  # a Redis user without either keeps going without it
            )
        except RequestTimeout as exc:
            raise self.unavailable("no answer to HGETALL in time") from exc
        if not isinstance(policy, BaseException):
            self.fail_policy.update(policy)
        self._raise_refusal(probe)
        return self._liveness.judge(raw, now, self.settings.workers.dead_after_ms)

    def _send_until_written(
        self,
        conn: Any,
        inbox: ConnectionInbox,
        lane: Lane,
        prepared: reqrep.PreparedRequest,
        end: float,
    ) -> dict[bytes, bytes] | None:
        """:meth:`_send_and_read`, tried again while the request stream refuses every XADD
        as exhausted (see :func:`stream_unwritable`) and the deadline leaves time."""
        while True:
            try:
                return self._send_and_read(conn, inbox, lane, prepared, end)
            except RedisCommandError as exc:
                if not stream_unwritable(exc) or end - time.monotonic() <= STREAM_RETRY_S:
                    raise
                time.sleep(STREAM_RETRY_S)

    def _send_and_read(
        self,
        conn: Any,
        inbox: ConnectionInbox,
        lane: Lane,
        prepared: reqrep.PreparedRequest,
        end: float,
    ) -> dict[bytes, bytes] | None:
        """XADD the request and XREAD its reply, in one write (with the inbox's keepalive
        or trim ahead of them when due); the fields of the inbox entry read."""
        before = inbox.before_request(prepared.deadline_ms)
        xadd = lane.xadd_head + resp.bulk(prepared.data)
        after = inbox.after_request()
        gate = self._request_gate(lane.keys)
        look = gate.check()  # the stream's length, when due, rides in the same write
        tail = [*after, look] if look is not None else after
        replies = lane.pool.call(
            conn, end, *before, xadd, self._xread(inbox, end), *tail, optional=len(tail)
        )
        if before:
            failed = renewal_failure(replies[: len(before)])
            if failed is not None:  # the reply would be dropped: say why now
                inbox.ttl.forget()
                raise RedisCommandError(f"Redis refused the reply inbox's renewal: {failed}")
        gate.added()
        if look is not None:
            gate.take(replies.pop())
        if after and isinstance(replies[-1], Exception):
            inbox.trim_refused(replies[-1])
        return inbox.take(replies[len(before) + 1])

    def _read(
        self, lane: Lane, conn: Any, inbox: ConnectionInbox, end: float
    ) -> dict[bytes, bytes] | None:
        """XREAD the inbox again (the last entry answered another call)."""
        (found,) = lane.pool.call(conn, end, self._xread(inbox, end))
        return inbox.take(found)

    def _read_for(
        self, lane: Lane, conn: Any, inbox: ConnectionInbox, block_s: int
    ) -> dict[bytes, bytes] | None:
        """XREAD the inbox, Redis blocking ``block_s`` at most (None: nothing came)."""
        (found,) = lane.pool.call(conn, time.monotonic() + block_s + 1.0, inbox.xread(block_s))
        return inbox.take(found)

    def _exists(self, lane: Lane, conn: Any, key: str) -> bool | None:
        """Whether ``key`` exists; None when this Redis user may not ask (said once)."""
        (found,) = lane.pool.call(conn, time.monotonic() + 1.0, ("EXISTS", key), optional=1)
        if isinstance(found, BaseException):
            log.warning("cannot check that a parked request's approval exists: %s", found)
            return None
        return bool(found)

    def _xread(self, inbox: ConnectionInbox, end: float) -> bytes:
        return inbox.xread(reqrep.blpop_timeout_s(time_left(end)))

    def _decision(
        self, fields: dict[bytes, bytes] | None, prepared: reqrep.PreparedRequest, strict: bool
    ) -> Decision | None:
        """The decision of an inbox entry for this call; None for another call's entry."""
        if fields is None:  # cannot happen: the server timeout is past the deadline
            raise RequestTimeout("XREAD returned nothing")
        reply = reqrep.decode_reply(fields.get(reqrep.INBOX_DECISION_FIELD, b""))
        if isinstance(reply, WireError):
            filed_under = fields.get(reqrep.INBOX_ID_FIELD, b"").decode(errors="replace")
            if filed_under not in (prepared.request_id, prepared.event.id):
                self.dropped_replies += 1
                return None  # not ours (and not a decision): skip it
        return self._accept_reply(reply, prepared, strict)

    # --- non-blocking events ------------------------------------------------------------

    def session(self, agent_id: str, session_id: str | None = None, **options: Any) -> AgentSession:
        """An agent session on this bus: ``before_tool``, ``after_tool``, ``prompt``,
        ``stop``, ``end`` and the ``guarded`` decorator (see
        :mod:`hookbus.producers.agent_session`)."""
        from hookbus.producers.agent_session import AgentSession

        return AgentSession(self, agent_id, session_id, **options)

    @traced_publish
    def publish(self, event: Event) -> str:
        """Append a non-blocking event to the event log; returns the event's id.

        Raises :class:`RedisUnavailable` when Redis does not answer within the client's
        ``publish_timeout_s`` (1 s by default), :class:`InvalidPayload` /
        :class:`EventTooLarge` / :class:`UnknownEventKind` for an event that cannot be sent.
        """
        return self.publish_many([event])[0]

    def publish_many(self, events: Iterable[Event]) -> list[str]:
        """Append several events in one write (one XADD each; with partitions on a Redis
        Cluster, one write per master), within one publish timeout; returns their event ids
        (what the decision log, tail and the hooks see)."""
        from hookbus.bus import eventlog

        datas = []
        sent = list(events)
        for event in sent:
            self._check_published(event)
            datas.append(eventlog.prepare(self.settings, event))
        if not datas:
            return []
        # each event to its session's partition's stream, in the order given; on a single
        # server one write, on a cluster one per master holding some of them. No trimming:
        # the dispatchers trim what they took; a stream at its limit refuses (see eventlog)
        streams = [eventlog.stream_of(self.settings, e) for e in sent]
        looks = eventlog.gate_events(self._gates, self.settings, streams)
        groups: dict[int, tuple[RequestConnections, list[tuple[Any, ...]], set[str]]] = {}
        for event, key, data in zip(sent, streams, datas, strict=True):
            pool = self._lane(event.session_id).pool if self._on_cluster else self._pool
            group = groups.setdefault(id(pool), (pool, [], set()))
            group[1].append(("XADD", key, "*", eventlog.EVENT_FIELD, data))
            group[2].add(key)
        end = time.monotonic() + self.publish_timeout_s
        entry_ids: list[Any] = []
        for pool, commands, keys_here in groups.values():
            here = [(gate, cmd) for gate, cmd in looks if gate.key in keys_here]
            conn = pool.take()
            try:
                replies = pool.call(conn, end, *commands, *(c for _, c in here), optional=len(here))
            except RequestTimeout as exc:
                raise self.unavailable(
                    f"no answer to XADD within {self.publish_timeout_s:g} s"
                ) from exc
            except RedisUnavailable as exc:  # say which namespace too
                raise self.unavailable(exc.reason) from exc
            finally:
                pool.give_back(conn)
            for (gate, _), reply in zip(here, replies[len(commands) :], strict=True):
                gate.take(reply)
            entry_ids += replies[: len(commands)]
        if len(entry_ids) != len(datas):  # pragma: no cover - one reply per XADD
            raise RuntimeError("the event log answered a different number of XADDs")
        return [event.id for event in sent]

    def _event_stream(self, session_id: str | None) -> str:
        """The event stream of a session's partition (the namespace's own with one)."""
        if self.settings.partitions == 1:
            return self.keys.events
        from hookbus.bus.keys import partition_events, partition_of

        partition = partition_of(session_id, self.settings.partitions)
        return partition_events(self.settings.namespace, partition)

    # --- lifecycle ----------------------------------------------------------------------

    def close(self) -> None:
        """Drop this client's request connections (the shared pool stays for others)."""
        if not self._closed:
            self._closed = True
            for lane in self._lanes.values():
                lane.pool.disconnect()

    def __enter__(self) -> HookBus:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
