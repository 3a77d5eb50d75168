"""The event log: publishing non-blocking events to ``hookbus:{ns}:events``.

With ``partitions`` > 1 an event goes to the event stream of its session's partition
(:func:`stream_of`: ``hookbus:{ns:p}:events``, partition 0 keeps ``hookbus:{ns}:events``),
so one session's events stay in order in one stream and a Redis Cluster spreads the
namespace's events over its masters. On a cluster the partitions' streams may live on
other masters than the client given: the publish functions reach them through
:func:`hookbus.bus.connection.partition_client`.

A publish is exactly one XADD (one round trip, never retried: a blind retry of a write that
may have landed could publish an event twice), without trimming: the dispatchers trim what
they have taken (:mod:`hookbus.workers.fleet.trimmer`), and a stream that holds
``streams.events_maxlen`` events nobody took refuses more (:mod:`hookbus.bus.policy.backlog`,
:class:`~hookbus.errors.StreamBacklogFull`) instead of losing the oldest. The entry
holds one field, :data:`EVENT_FIELD`, whose value is the msgpack-encoded :class:`Event`
with its kind made canonical, so the fan-out dispatcher and anyone replaying the log decode
it without a catalogue.

Everything a producer can get wrong (an unknown kind, an oversize event) is refused here,
before a byte is sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec
import redis.exceptions

from hookbus.bus import keys
from hookbus.bus.connection import client_url, is_cluster_url, partition_client, translate_error
from hookbus.bus.kinds import Catalogue
from hookbus.bus.policy.backlog import BacklogGate, Gates
from hookbus.bus.wire import Event, encode
from hookbus.errors import EventTooLarge, StreamBacklogFull

if TYPE_CHECKING:
    import redis
    import redis.asyncio

    from hookbus.bus.settings.loader import Settings

#: The one field of an event log entry: the msgpack-encoded event.
EVENT_FIELD = keys.ENTRY_FIELD

_REDIS_ERRORS = (redis.exceptions.RedisError, ConnectionError, OSError)

# Settings.catalogue() builds a new Catalogue when custom kinds are configured; the hot
# path must not pay for that per event, so catalogues are cached by their custom kinds.
_catalogues: dict[tuple[tuple[str, bool], ...], Catalogue] = {}


def _catalogue(settings: Settings) -> Catalogue:
    if not settings.custom_kinds:
        return settings.catalogue()
    key = tuple(sorted(settings.custom_kinds.items()))
    found = _catalogues.get(key)
    if found is None:
        found = settings.catalogue()
        _catalogues[key] = found
    return found


def prepare(settings: Settings, event: Event) -> bytes:
    """The bytes one event is stored as: kind made canonical, size checked.

    Raises :class:`~hookbus.errors.UnknownEventKind` for a kind the catalogue (with the
    configured custom kinds) does not know and :class:`~hookbus.errors.EventTooLarge` when
    the encoded event is over ``streams.max_event_bytes``.
    """
    kind = _catalogue(settings).resolve(event.kind).kind
    if kind != event.kind:
        event = msgspec.structs.replace(event, kind=kind)
    data = encode(event)
    limit = settings.streams.max_event_bytes
    if len(data) > limit:
        raise EventTooLarge(len(data), limit)
    return data


def partition_for(settings: Settings, event: Event) -> int:
    """The partition of ``event``'s stream: its session's (:func:`keys.partition_of`)."""
    return keys.partition_of(event.session_id, settings.partitions)


def stream_of(settings: Settings, event: Event) -> str:
    """The event stream ``event`` is appended to (its session's partition)."""
    return keys.partition_events(settings.namespace, partition_for(settings, event))


def _client_for(client: redis.Redis, settings: Settings, partition: int) -> redis.Redis:
    """``client``, or on a Redis Cluster the master of partition ``partition``'s slot
    (``client`` is the namespace's, which serves partition 0)."""
    if partition == 0 or not is_cluster_url(settings.effective_redis_url):
        return client
    return partition_client(settings, partition)


def publish(
    client: redis.Redis, settings: Settings, event: Event, *, gates: Gates | None = None
) -> str:
    """Append ``event`` to the event log; return its stream entry id.

    One XADD (no trimming: the dispatchers trim what they have taken) to the stream of the
    event's partition, with an XLEN when the stream's length is due for a look
    (:mod:`hookbus.bus.policy.backlog`); raises :class:`StreamBacklogFull` while the stream
    holds ``streams.events_maxlen`` events no dispatcher has taken. Every fan-out
    dispatcher will see it and run each matching non-blocking hook once, on an RQ worker.
    """
    return publish_many(client, settings, [event], gates=gates)[0]


def publish_many(
    client: redis.Redis,
    settings: Settings,
    events: Iterable[Event],
    *,
    gates: Gates | None = None,
) -> list[str]:
    """Append many events in one pipelined round trip (one per master on a cluster);
    return their entry ids in order.

    Every event is checked before anything is sent, so one bad event (or one stream at its
    limit) refuses the batch. Each event goes to its partition's stream, in the order given.
    """
    sent = list(events)
    payloads = [prepare(settings, event) for event in sent]
    if not payloads:
        return []
    gates = gates if gates is not None else Gates()
    groups = _by_client(client, settings, sent)
    streams = [stream_of(settings, event) for event in sent]
    checks = gate_events(gates, settings, streams)
    entry_ids: list[bytes | str] = [b""] * len(payloads)
    for target, indexes in groups:
        looks = [
            (gate, cmd) for gate, cmd in checks if any(streams[i] == gate.key for i in indexes)
        ]
        try:
            with target.pipeline(transaction=False) as pipe:
                for i in indexes:
                    pipe.xadd(streams[i], {EVENT_FIELD: payloads[i]})
                for gate, _ in looks:
                    pipe.xlen(gate.key)
                replies: Sequence[Any] = pipe.execute(raise_on_error=False)
        except _REDIS_ERRORS as exc:
            raise translate_error(exc, client_url(target)) from exc
        _settle(looks, replies[len(indexes) :])
        for i, entry_id in zip(indexes, _entry_ids(replies[: len(indexes)], target), strict=True):
            entry_ids[i] = entry_id
    return [_text(e) for e in entry_ids]


def gate_events(
    gates: Gates, settings: Settings, streams: list[str]
) -> list[tuple[BacklogGate, Any]]:
    """Raise :class:`StreamBacklogFull` when a stream of ``streams`` (one per event) holds
    its limit; else the XLENs due (one per stream, to send with the XADDs); counts the adds."""
    limit = settings.streams.events_maxlen
    counts: dict[str, int] = {}
    for key in streams:
        counts[key] = counts.get(key, 0) + 1
    checks = []
    for key, n in counts.items():
        gate = gates.events(key, limit)
        refusal = gate.refusal()
        if refusal is not None:
            raise StreamBacklogFull(refusal, key=key)
        cmd = gate.check()
        if cmd is not None:
            checks.append((gate, cmd))
        gate.added(n)
    return checks


def _settle(looks: list[tuple[BacklogGate, Any]], replies: Sequence[Any]) -> None:
    """Hand the XLEN replies to their gates."""
    for (gate, _), reply in zip(looks, replies, strict=False):
        gate.take(reply)


def _entry_ids(replies: Sequence[Any], target: Any) -> list[bytes | str]:
    """The XADDs' entry ids; the first refused one's error, translated, is raised."""
    for reply in replies:
        if isinstance(reply, BaseException):
            raise translate_error(reply, client_url(target)) from reply
    return list(replies)


def _by_client(
    client: redis.Redis, settings: Settings, events: Sequence[Event]
) -> list[tuple[redis.Redis, list[int]]]:
    """The indexes of ``events`` grouped by the client their partition's stream is on
    (one group, ``client``, on a single server), each group in the given order."""
    groups: dict[int, tuple[redis.Redis, list[int]]] = {}
    for i, event in enumerate(events):
        target = _client_for(client, settings, partition_for(settings, event))
        groups.setdefault(id(target.connection_pool), (target, []))[1].append(i)
    return list(groups.values())


async def apublish(
    client: redis.asyncio.Redis, settings: Settings, event: Event, *, gates: Gates | None = None
) -> str:
    """The asyncio twin of :func:`publish`, on one server: ``client`` must be the one
    serving the event's partition (the asyncio client passes its partition's lane)."""
    return (await apublish_many(client, settings, [event], gates=gates))[0]


async def apublish_many(
    client: redis.asyncio.Redis,
    settings: Settings,
    events: Iterable[Event],
    *,
    gates: Gates | None = None,
) -> list[str]:
    """The asyncio twin of :func:`publish_many`, on one server: ``client`` must serve the
    partitions of every event (the asyncio client groups them by lane)."""
    sent = list(events)
    payloads = [prepare(settings, event) for event in sent]
    if not payloads:
        return []
    streams = [stream_of(settings, event) for event in sent]
    looks = gate_events(gates if gates is not None else Gates(), settings, streams)
    try:
        async with client.pipeline(transaction=False) as pipe:
            for key, data in zip(streams, payloads, strict=True):
                pipe.xadd(key, {EVENT_FIELD: data})
            for gate, _ in looks:
                pipe.xlen(gate.key)
            replies: Sequence[Any] = await pipe.execute(raise_on_error=False)
    except _REDIS_ERRORS as exc:
        raise translate_error(exc, client_url(client)) from exc
    _settle(looks, replies[len(sent) :])
    return [_text(e) for e in _entry_ids(replies[: len(sent)], client)]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
