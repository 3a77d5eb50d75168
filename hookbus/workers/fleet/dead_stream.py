"""Dead letters of the streams: entries the chain workers and the fan-out dispatchers gave up.

A request or an event that cannot be served (undecodable, delivered too often, its workers
died running it) is moved to a dead-letter stream with the reason, the worker and the
entry's bytes: the stream of its partition, ``hookbus:{ns}:dead`` for partition 0 and
``hookbus:{ns:p}:dead`` for partition p > 0 (``HOOKBUS_PARTITIONS``; on a Redis Cluster
each read on the master serving it). ``hookbus dlq`` shows them next to RQ's failed jobs
(:mod:`~hookbus.workers.fleet.dead_letters`) under ids ``dl-<entry id>`` for partition 0 (the
ids hookbus gave before partitions, so scripts keep working) and ``dl-p<p>:<entry id>``
for partition p. A dead event can be requeued (published again to its session's
partition); a dead request cannot (its caller already had its answer at its deadline),
only shown and purged.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple

import redis
import redis.exceptions

from hookbus.bus.connection import is_cluster_url, partition_client
from hookbus.bus.eventlog import EVENT_FIELD
from hookbus.bus.keys import FANOUT_GROUP, Keys, partition_events, partition_of
from hookbus.bus.wire import Event, to_builtins
from hookbus.errors import JobNotFound, WireError
from hookbus.workers.entry_decoding import decode_event

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings

#: Prefix of a stream dead letter's id in ``hookbus dlq`` (RQ job ids start ``hb``).
ID_PREFIX = "dl-"


class DeadEntry(NamedTuple):
    """One entry of a partition's dead-letter stream."""

    partition: int
    entry_id: bytes
    fields: dict[bytes, bytes]


def is_stream_id(dead_id: str) -> bool:
    return dead_id.startswith(ID_PREFIX)


def dead_id(partition: int, entry_id: bytes | str) -> str:
    """The id ``hookbus dlq`` shows for an entry of partition ``partition``'s stream:
    ``dl-<entry id>`` in partition 0, ``dl-p<partition>:<entry id>`` elsewhere."""
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return f"{ID_PREFIX}{text}" if partition == 0 else f"{ID_PREFIX}p{partition}:{text}"


def parse_id(dead: str) -> tuple[int, str]:
    """The partition and stream entry id of a dead letter's id (see :func:`dead_id`); an id
    that is no entry id is left for XRANGE to refuse (a :class:`JobNotFound` then)."""
    rest = dead.removeprefix(ID_PREFIX)
    head, sep, tail = rest.partition(":")
    if sep and head.startswith("p") and head[1:].isdigit():
        return int(head[1:]), tail
    return 0, rest


def _client_of(client: redis.Redis, settings: Settings, partition: int) -> redis.Redis:
    """The client serving partition ``partition``'s slot: ``client`` (the namespace's own)
    on one server or for partition 0, the partition's master on a Redis Cluster."""
    if partition and is_cluster_url(settings.effective_redis_url):
        return partition_client(settings, partition)
    return client


def _key(settings: Settings, partition: int) -> str:
    return Keys.for_partition(settings.namespace, partition).dead_letters


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _event(fields: dict[bytes, bytes], settings: Settings) -> Event | None:
    raw = fields.get(b"e")
    if raw is None:
        return None
    try:
        return decode_event(raw, max_bytes=settings.streams.max_event_bytes)
    except WireError:
        return None


def summary(dead: DeadEntry, settings: Settings) -> dict[str, Any]:
    """One dead letter in the shape of ``DeadJob.to_dict()``."""
    event = _event(dead.fields, settings)
    ms = int(dead.entry_id.split(b"-", 1)[0])
    return {
        "id": dead_id(dead.partition, dead.entry_id),
        "hook": None,
        "event": event.id if event is not None else None,
        "kind": event.kind if event is not None else None,
        "events": 1,
        "failed_at": datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(),
        "error": _text(dead.fields.get(b"reason")),
        "tries": int(dead.fields.get(b"deliveries", b"1") or 1),
    }


def _order(entry_id: bytes) -> tuple[int, int]:
    ms, _, seq = entry_id.partition(b"-")
    return int(ms), int(seq or 0)


def entries(
    client: redis.Redis, settings: Settings, *, limit: int | None = None
) -> list[DeadEntry]:
    """The dead letters of every partition, oldest first (at most ``limit``)."""
    found: list[DeadEntry] = []
    for partition in range(settings.partitions):
        here = _client_of(client, settings, partition)
        page: Any = here.xrange(_key(settings, partition), count=limit)
        found += [DeadEntry(partition, entry_id, fields) for entry_id, fields in page]
    found.sort(key=lambda d: (_order(d.entry_id), d.partition))
    return found if limit is None else found[:limit]


def count(client: redis.Redis, settings: Settings) -> int:
    """How many dead letters every partition's stream holds."""
    return sum(
        int(_client_of(client, settings, p).xlen(_key(settings, p)))
        for p in range(settings.partitions)
    )


def _one(client: redis.Redis, settings: Settings, dead: str) -> DeadEntry:
    partition, entry_id = parse_id(dead)
    here = _client_of(client, settings, partition)
    try:
        found: Any = here.xrange(_key(settings, partition), min=entry_id, max=entry_id, count=1)
    except redis.exceptions.ResponseError as exc:  # a malformed id
        raise JobNotFound(f"no dead letter {dead!r} (see `hookbus dlq list`)") from exc
    if not found:
        raise JobNotFound(
            f"no dead letter {dead!r}: it may have been requeued or purged (see `hookbus dlq list`)"
        )
    return DeadEntry(partition, found[0][0], found[0][1])


def show(client: redis.Redis, settings: Settings, dead: str) -> dict[str, Any]:
    """Everything about one stream dead letter, the entry's event decoded when it can be."""
    entry = _one(client, settings, dead)
    fields = entry.fields
    data = summary(entry, settings)
    event = _event(fields, settings)
    raw = fields.get(b"e") or fields.get(b"item") or b""
    data.update(
        {
            "traceback": None,
            "description": f"{_text(fields.get(b'group'))} entry {_text(fields.get(b'entry_id'))}",
            "enqueued_at": None,
            "meta": {
                name: _text(fields.get(name.encode()))
                for name in ("stream", "entry_id", "group", "worker", "reason", "deliveries")
            },
            "in_registry": True,
            "events_data": [to_builtins(event)]
            if event is not None
            else [{"undecodable": len(raw)}],
        }
    )
    return data


def requeue(client: redis.Redis, settings: Settings, dead: str) -> str:
    """Publish a dead event again (and drop its dead letter); requests are refused.

    The event goes back to the stream of its session's partition (:mod:`hookbus.bus.keys`,
    ``partition_of``); an event that cannot be decoded (no session to read) to the
    partition whose dead letter it is. When the dead letter and the stream are in one slot,
    or on one server, the XADD and the XDEL are one transaction; on a Redis Cluster, where
    the two may live on different masters, the event is published first and its dead
    letter dropped after (a failure in between leaves the dead letter, to be purged or
    requeued again: the event is never lost).
    """
    entry = _one(client, settings, dead)
    data = entry.fields.get(b"e")
    if _text(entry.fields.get(b"group")) != FANOUT_GROUP or data is None:
        raise JobNotFound(
            f"dead letter {dead!r} is a blocking request (or has no event): its caller had "
            "its answer at its deadline, so it cannot be requeued; purge it instead"
        )
    event = _event(entry.fields, settings)
    partition = (
        partition_of(event.session_id, settings.partitions)
        if event is not None
        else min(entry.partition, settings.partitions - 1)
    )
    stream = partition_events(settings.namespace, partition)
    dead_key = _key(settings, entry.partition)
    source = _client_of(client, settings, entry.partition)
    maxlen = settings.streams.events_maxlen
    if partition != entry.partition and is_cluster_url(settings.effective_redis_url):
        target = _client_of(client, settings, partition)
        target.xadd(stream, {EVENT_FIELD: data}, maxlen=maxlen, approximate=True)
        source.xdel(dead_key, entry.entry_id)
        return dead
    pipe = source.pipeline(transaction=True)
    pipe.xadd(stream, {EVENT_FIELD: data}, maxlen=maxlen, approximate=True)
    pipe.xdel(dead_key, entry.entry_id)
    pipe.execute()
    return dead


def requeue_events(client: redis.Redis, settings: Settings) -> list[str]:
    """Requeue every dead event of every partition; returns their ids (dead requests stay)."""
    done: list[str] = []
    for entry in entries(client, settings):
        if _text(entry.fields.get(b"group")) == FANOUT_GROUP and b"e" in entry.fields:
            done.append(requeue(client, settings, dead_id(entry.partition, entry.entry_id)))
    return done


def purge(client: redis.Redis, settings: Settings, dead_ids: list[str] | None) -> int:
    """Delete the given stream dead letters (all of every partition when ``dead_ids`` is
    None); returns how many were deleted."""
    if dead_ids is None:
        removed = 0
        for partition in range(settings.partitions):
            here = _client_of(client, settings, partition)
            removed += int(here.xlen(_key(settings, partition)))
            here.delete(_key(settings, partition))
        return removed
    by_partition: dict[int, list[str]] = {}
    for dead in dead_ids:
        if is_stream_id(dead):
            partition, entry_id = parse_id(dead)
            by_partition.setdefault(partition, []).append(entry_id)
    removed = 0
    for partition, ids in by_partition.items():
        here = _client_of(client, settings, partition)
        key = _key(settings, partition)
        try:
            removed += int(here.xdel(key, *ids))
        except redis.exceptions.ResponseError:  # a malformed id: delete the others one by one
            removed += sum(_xdel_one(here, key, i) for i in ids)
    return removed


def _xdel_one(client: redis.Redis, key: str, entry_id: str) -> int:
    try:
        return int(client.xdel(key, entry_id))
    except redis.exceptions.ResponseError:
        return 0
