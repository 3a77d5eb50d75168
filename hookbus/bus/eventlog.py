"""The event log: publishing non-blocking events to ``hookbus:{ns}:events``.

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
from hookbus.bus.connection import client_url, translate_error
from hookbus.bus.kinds import Catalogue
from hookbus.bus.wire import Event, encode
from hookbus.errors import EventTooLarge

if TYPE_CHECKING:
    import redis
    import redis.asyncio

    from hookbus.bus.settings import Settings

#: The one field of an event log entry: the msgpack-encoded event.
EVENT_FIELD = b"e"

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


def publish(client: redis.Redis, settings: Settings, event: Event) -> str:
    """Append ``event`` to the event log; return its stream entry id.

    One XADD with ``MAXLEN ~ streams.events_maxlen``. Every fan-out dispatcher will see it
    and run each matching non-blocking hook once, on an RQ worker.
    """
    data = prepare(settings, event)
    try:
        entry_id = client.xadd(
            keys.events(settings.namespace),
            {EVENT_FIELD: data},
            maxlen=settings.streams.events_maxlen,
            approximate=True,
        )
    except _REDIS_ERRORS as exc:
        raise translate_error(exc, client_url(client)) from exc
    return _text(entry_id)


def publish_many(client: redis.Redis, settings: Settings, events: Iterable[Event]) -> list[str]:
    """Append many events in one pipelined round trip; return their entry ids in order.

    Every event is checked before anything is sent, so one bad event refuses the batch.
    """
    payloads = [prepare(settings, event) for event in events]
    if not payloads:
        return []
    key = keys.events(settings.namespace)
    maxlen = settings.streams.events_maxlen
    try:
        with client.pipeline(transaction=False) as pipe:
            for data in payloads:
                pipe.xadd(key, {EVENT_FIELD: data}, maxlen=maxlen, approximate=True)
            entry_ids: Sequence[bytes | str] = pipe.execute()
    except _REDIS_ERRORS as exc:
        raise translate_error(exc, client_url(client)) from exc
    return [_text(e) for e in entry_ids]


async def apublish(client: redis.asyncio.Redis, settings: Settings, event: Event) -> str:
    """The asyncio twin of :func:`publish`."""
    data = prepare(settings, event)
    try:
        entry_id = await client.xadd(
            keys.events(settings.namespace),
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
    """The asyncio twin of :func:`publish_many`."""
    payloads = [prepare(settings, event) for event in events]
    if not payloads:
        return []
    key = keys.events(settings.namespace)
    maxlen = settings.streams.events_maxlen
    try:
        async with client.pipeline(transaction=False) as pipe:
            for data in payloads:
                pipe.xadd(key, {EVENT_FIELD: data}, maxlen=maxlen, approximate=True)
            entry_ids: Sequence[bytes | str] = await pipe.execute()
    except _REDIS_ERRORS as exc:
        raise translate_error(exc, client_url(client)) from exc
    return [_text(e) for e in entry_ids]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
