"""Dead letters of the streams: entries the chain workers and the fan-out dispatcher gave up.

A request or an event that cannot be served (undecodable, delivered too often, its workers
died running it) is moved to the stream ``hookbus:{ns}:dead`` with the reason, the worker
and the entry's bytes. ``hookbus dlq`` shows them next to RQ's failed jobs
(:mod:`~hookbus.workers.deadletters`) under ids ``dl-<entry id>``. A dead event can be
requeued (published again); a dead request cannot (its caller already had its answer at
its deadline), only shown and purged.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import redis
import redis.exceptions

from hookbus.bus.connection import is_cluster_url, partition_client
from hookbus.bus.eventlog import EVENT_FIELD
from hookbus.bus.keys import FANOUT_GROUP, Keys, partition_events, partition_of
from hookbus.bus.wire import Event, to_builtins
from hookbus.errors import JobNotFound, WireError
from hookbus.workers.entry_decoding import decode_event

if TYPE_CHECKING:
    from hookbus.bus.settings import Settings

#: Prefix of a stream dead letter's id in ``hookbus dlq`` (RQ job ids start ``hb``).
ID_PREFIX = "dl-"


def is_stream_id(dead_id: str) -> bool:
    return dead_id.startswith(ID_PREFIX)


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


def summary(entry_id: bytes, fields: dict[bytes, bytes], settings: Settings) -> dict[str, Any]:
    """One dead letter in the shape of ``DeadJob.to_dict()``."""
    event = _event(fields, settings)
    ms = int(entry_id.split(b"-", 1)[0])
    return {
        "id": ID_PREFIX + entry_id.decode(),
        "hook": None,
        "event": event.id if event is not None else None,
        "kind": event.kind if event is not None else None,
        "events": 1,
        "failed_at": datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(),
        "error": _text(fields.get(b"reason")),
        "tries": int(fields.get(b"deliveries", b"1") or 1),
    }


def entries(
    client: redis.Redis, settings: Settings, *, limit: int | None = None
) -> list[tuple[bytes, dict[bytes, bytes]]]:
    """The stream's dead letters, oldest first."""
    key = Keys.for_namespace(settings.namespace).dead_letters
    found: Any = client.xrange(key, count=limit)
    return list(found)


def count(client: redis.Redis, settings: Settings) -> int:
    return int(client.xlen(Keys.for_namespace(settings.namespace).dead_letters))


def _one(client: redis.Redis, settings: Settings, dead_id: str) -> tuple[bytes, dict[bytes, bytes]]:
    entry_id = dead_id.removeprefix(ID_PREFIX)
    key = Keys.for_namespace(settings.namespace).dead_letters
    try:
        found: Any = client.xrange(key, min=entry_id, max=entry_id, count=1)
    except redis.exceptions.ResponseError as exc:  # a malformed id
        raise JobNotFound(f"no dead letter {dead_id!r} (see `hookbus dlq list`)") from exc
    if not found:
        raise JobNotFound(
            f"no dead letter {dead_id!r}: it may have been requeued or purged "
            "(see `hookbus dlq list`)"
        )
    return found[0][0], found[0][1]


def show(client: redis.Redis, settings: Settings, dead_id: str) -> dict[str, Any]:
    """Everything about one stream dead letter, the entry's event decoded when it can be."""
    entry_id, fields = _one(client, settings, dead_id)
    data = summary(entry_id, fields, settings)
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


def requeue(client: redis.Redis, settings: Settings, dead_id: str) -> str:
    """Publish a dead event again (and drop its dead letter); requests are refused.

    The event goes back to the stream of its session's partition (:mod:`hookbus.bus.keys`,
    ``partition_of``). On one server the XADD and the XDEL are one transaction; on a Redis
    Cluster, where a partition's stream may live on another master, the event is published
    first and its dead letter dropped after (a failure in between leaves the dead letter,
    to be purged or requeued again: the event is never lost).
    """
    entry_id, fields = _one(client, settings, dead_id)
    keys = Keys.for_namespace(settings.namespace)
    data = fields.get(b"e")
    if _text(fields.get(b"group")) != FANOUT_GROUP or data is None:
        raise JobNotFound(
            f"dead letter {dead_id!r} is a blocking request (or has no event): its caller had "
            "its answer at its deadline, so it cannot be requeued; purge it instead"
        )
    event = _event(fields, settings)
    partition = partition_of(event.session_id if event is not None else None, settings.partitions)
    stream = partition_events(settings.namespace, partition)
    maxlen = settings.streams.events_maxlen
    if partition and is_cluster_url(settings.effective_redis_url):
        target = partition_client(settings, partition)
        target.xadd(stream, {EVENT_FIELD: data}, maxlen=maxlen, approximate=True)
        client.xdel(keys.dead_letters, entry_id)
        return dead_id
    pipe = client.pipeline(transaction=True)
    pipe.xadd(stream, {EVENT_FIELD: data}, maxlen=maxlen, approximate=True)
    pipe.xdel(keys.dead_letters, entry_id)
    pipe.execute()
    return dead_id


def requeue_events(client: redis.Redis, settings: Settings) -> list[str]:
    """Requeue every dead event; returns their ids (dead requests stay)."""
    done: list[str] = []
    for entry_id, fields in entries(client, settings):
        if _text(fields.get(b"group")) == FANOUT_GROUP and b"e" in fields:
            done.append(requeue(client, settings, ID_PREFIX + entry_id.decode()))
    return done


def purge(client: redis.Redis, settings: Settings, dead_ids: list[str] | None) -> int:
    """Delete the given stream dead letters (all of them when ``dead_ids`` is None)."""
    key = Keys.for_namespace(settings.namespace).dead_letters
    if dead_ids is None:
        removed = count(client, settings)
        client.delete(key)
        return removed
    ids = [d.removeprefix(ID_PREFIX) for d in dead_ids if is_stream_id(d)]
    if not ids:
        return 0
    try:
        return int(client.xdel(key, *ids))
    except redis.exceptions.ResponseError:  # a malformed id: delete the others one by one
        return sum(_xdel_one(client, key, i) for i in ids)


def _xdel_one(client: redis.Redis, key: str, entry_id: str) -> int:
    try:
        return int(client.xdel(key, entry_id))
    except redis.exceptions.ResponseError:
        return 0
