"""The event log: publishing non-blocking events to ``hookbus:{ns}:events``.

With ``partitions`` > 1 an event goes to the event stream of its session's partition
(:func:`stream_of`: ``hookbus:{ns:p}:events``, partition 0 keeps ``hookbus:{ns}:events``),
so one session's events stay in order in one stream and a Redis Cluster spreads the
namespace's events over its masters. On a cluster the partitions' streams may live on
other masters than the client given: the publish functions reach them through
:func:`hookbus.bus.connection.partition_client`.

A publish is exactly one XADD with an approximate MAXLEN (one round trip, never retried:
a blind retry of a write that may have landed could publish an event twice). The entry
holds one field, :data:`EVENT_FIELD`, whose value is the msgpack-encoded :class:`Event`
with its kind made canonical, so the fan-out dispatcher and anyone replaying the log decode
it without a catalogue.

Everything a producer can get wrong (an unknown kind, an oversize event) is refused here,
before a byte is sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import msgspec
import redis.exceptions

from hookbus.bus import keys
from hookbus.bus.connection import client_url, is_cluster_url, partition_client, translate_error
from hookbus.bus.kinds import Catalogue
from hookbus.bus.wire import Event, encode
from hookbus.errors import EventTooLarge

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


def publish(client: redis.Redis, settings: Settings, event: Event) -> str:
    """Append ``event`` to the event log; return its stream entry id.

    One XADD with ``MAXLEN ~ streams.events_maxlen`` to the stream of the event's
    partition. Every fan-out dispatcher will see it and run each matching non-blocking hook
    once, on an RQ worker.
    """
    data = prepare(settings, event)
    partition = partition_for(settings, event)
    try:
        entry_id = _client_for(client, settings, partition).xadd(
            keys.partition_events(settings.namespace, partition),
            {EVENT_FIELD: data},
            maxlen=settings.streams.events_maxlen,
            approximate=True,
        )
    except _REDIS_ERRORS as exc:
        raise translate_error(exc, client_url(client)) from exc
    return _text(entry_id)


def publish_many(client: redis.Redis, settings: Settings, events: Iterable[Event]) -> list[str]:
    """Append many events in one pipelined round trip (one per master on a cluster);
    return their entry ids in order.

    Every event is checked before anything is sent, so one bad event refuses the batch.
    Each event goes to its partition's stream, in the order given.
    """
    sent = list(events)
    payloads = [prepare(settings, event) for event in sent]
    if not payloads:
        return []
    maxlen = settings.streams.events_maxlen
    groups = _by_client(client, settings, sent)
    entry_ids: list[bytes | str] = [b""] * len(payloads)
    for target, indexes in groups:
        try:
            with target.pipeline(transaction=False) as pipe:
                for i in indexes:
                    key = stream_of(settings, sent[i])
                    pipe.xadd(key, {EVENT_FIELD: payloads[i]}, maxlen=maxlen, approximate=True)
                replies: Sequence[bytes | str] = pipe.execute()
        except _REDIS_ERRORS as exc:
            raise translate_error(exc, client_url(target)) from exc
        for i, entry_id in zip(indexes, replies, strict=True):
            entry_ids[i] = entry_id
    return [_text(e) for e in entry_ids]


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


async def apublish(client: redis.asyncio.Redis, settings: Settings, event: Event) -> str:
    """The asyncio twin of :func:`publish`, on one server: ``client`` must be the one
    serving the event's partition (the asyncio client passes its partition's lane)."""
    data = prepare(settings, event)
    try:
        entry_id = await client.xadd(
            stream_of(settings, event),
            {EVENT_FIELD: data},
            maxlen=settings.streams.events_maxlen,
            approximate=True,
        )
    except _REDIS_ERRORS as exc:
        raise translate_error(exc, client_url(client)) from exc
    return _text(entry_id)


async def apublish_many(
    client: redis.asyncio.Redis, settings: Settings, events: Iterable[Event]
) -> list[str]:
    """The asyncio twin of :func:`publish_many`, on one server: ``client`` must serve the
    partitions of every event (the asyncio client groups them by lane)."""
    sent = list(events)
    payloads = [prepare(settings, event) for event in sent]
    if not payloads:
        return []
    maxlen = settings.streams.events_maxlen
    try:
        async with client.pipeline(transaction=False) as pipe:
            for event, data in zip(sent, payloads, strict=True):
                key = stream_of(settings, event)
                pipe.xadd(key, {EVENT_FIELD: data}, maxlen=maxlen, approximate=True)
            entry_ids: Sequence[bytes | str] = await pipe.execute()
    except _REDIS_ERRORS as exc:
        raise translate_error(exc, client_url(client)) from exc
    return [_text(e) for e in entry_ids]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
