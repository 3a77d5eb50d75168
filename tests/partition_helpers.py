"""Helpers of the partitioned-event tests (issue 16 point 2): an order-recording hook, the
sessions that cover every partition, and what each partition's stream holds."""

from __future__ import annotations

import textwrap
from pathlib import Path

import redis

from hookbus.bus.keys import Keys, partition_of

#: A non-blocking hook that counts each event it runs on (hash ``$FANOUT_RECORD_KEY``,
#: field = event id) and appends the event's ``payload["i"]`` to its session's list
#: (``$FANOUT_RECORD_KEY:order:<session>``): a count of 2 is an event run twice, a list out
#: of order is a session whose events ran out of order.
ORDER_HANDLER = textwrap.dedent(
    """
    import os

    import redis

    _client = None


    def record(event):
        global _client
        if _client is None:
            _client = redis.Redis.from_url(os.environ["FANOUT_RECORD_URL"])
        key = os.environ["FANOUT_RECORD_KEY"]
        pipe = _client.pipeline(transaction=False)
        pipe.hincrby(key, event.id, 1)
        pipe.rpush(f"{key}:order:{event.session_id}", event.payload["i"])
        pipe.execute()
    """
)


def write_order_hook(root: Path, name: str = "order") -> Path:
    """A python hook on PostToolUse running :data:`ORDER_HANDLER`'s ``record``."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "order_handler.py").write_text(ORDER_HANDLER)
    (folder / "HOOK.toml").write_text(
        f'name = "{name}"\nevents = ["PostToolUse"]\nblocking = false\n'
        '[action.python]\nentrypoint = "order_handler:record"\ntimeout_secs = 10\n'
    )
    return folder


def sessions_covering(partitions: int, per_partition: int = 2, prefix: str = "s") -> list[str]:
    """Session ids, ``per_partition`` of each partition (CRC-32 of the id, as producers
    choose), so a test knows every partition gets events."""
    found: dict[int, list[str]] = {p: [] for p in range(partitions)}
    i = 0
    while any(len(v) < per_partition for v in found.values()):
        session = f"{prefix}{i}"
        bucket = found[partition_of(session, partitions)]
        if len(bucket) < per_partition:
            bucket.append(session)
        i += 1
    return [s for p in range(partitions) for s in found[p]]


def order_of(client: redis.Redis, record_key: str, session: str) -> list[int]:
    """The ``payload["i"]`` of a session's events in the order the hook ran them."""
    return [int(v) for v in client.lrange(f"{record_key}:order:{session}", 0, -1)]


def counts(client: redis.Redis, record_key: str) -> dict[str, int]:
    """How often the hook ran on each event id."""
    return {k.decode(): int(v) for k, v in client.hgetall(record_key).items()}


def lengths(clients: list[redis.Redis], ns: str) -> list[int]:
    """XLEN of each partition's event stream (``clients[p]`` serves partition ``p``)."""
    return [int(c.xlen(Keys.for_partition(ns, p).events)) for p, c in enumerate(clients)]


def delete_partitions(client: redis.Redis, ns: str) -> None:
    """Delete the keys of a namespace's partitions 1.. (the shared fixture deletes ``{ns}``'s)."""
    from hookbus.bus.keys import partitions_pattern

    found = list(client.scan_iter(match=partitions_pattern(ns), count=1000))
    if found:
        client.delete(*found)
