"""``hookbus tail`` over every partition of a namespace's event (or decision) log.

With ``partitions`` > 1 (issue 16) each session's events are in the stream of its partition,
so a tail of partition 0 alone would miss the rest. This module reads each partition with
:mod:`hookbus.bus.tail.reader` (``last`` and ``follow``, unchanged) and merges them: the last
entries of every partition in Redis-time order, and the new ones as they arrive, one
following thread per partition (a Redis Cluster forbids one ``XREAD`` over streams of
several slots, and a partition may live on another master). One session's entries keep
their order (they are in one stream); entries of different partitions appear in the order
they were read. With one partition on a single server it is :mod:`tailing` itself.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING

from hookbus.bus.connection import bus_client, is_cluster_url, partition_client
from hookbus.bus.keys import Keys
from hookbus.bus.tail import reader as tailing

if TYPE_CHECKING:
    import redis

    from hookbus.bus.settings.loader import Settings
    from hookbus.bus.tail.entry import TailEntry

#: How often the merging loop checks whether to stop while no entry arrives, in seconds.
POLL_S = 0.1
#: How long stopping waits for the following threads (each wakes every block), in seconds.
JOIN_S = 2.0


class Target:
    """One partition's log as the tail reads it: the client of its master and its keys."""

    __slots__ = ("client", "keys")

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys


def targets(settings: Settings) -> list[Target]:
    """Every partition of the namespace, each with the client that serves it (on a cluster
    the master of its slot; on one server one client for all)."""
    own = bus_client(settings)
    on_cluster = is_cluster_url(settings.effective_redis_url)
    return [
        Target(
            partition_client(settings, p) if on_cluster and p else own,
            Keys.for_partition(settings.namespace, p),
        )
        for p in range(settings.partitions)
    ]


def last(parts: list[Target], *, decisions: bool, n: int) -> tuple[list[TailEntry], list[str]]:
    """The last ``n`` entries over every partition, oldest first, and where each
    partition's follow should start (its newest entry read, else ``$``)."""
    merged: list[tuple[int, int, TailEntry]] = []
    after: list[str] = []
    for index, part in enumerate(parts):
        entries = tailing.last(part.client, part.keys, decisions=decisions, n=n)
        after.append(entries[-1].entry_id if entries else "$")
        merged += [(_order(e.entry_id), index, e) for e in entries]
    merged.sort(key=lambda item: (item[0], item[1]))
    newest = [entry for _, _, entry in merged]
    return (newest[-n:] if n > 0 else []), after


def _order(entry_id: str) -> int:
    ms, _, seq = entry_id.partition("-")
    return int(ms) * 1_000_000 + int(seq or 0)


def follow(
    parts: list[Target],
    *,
    decisions: bool,
    after: list[str],
    stop: Callable[[], bool] = lambda: False,
) -> Generator[TailEntry, None, None]:
    """New entries of every partition as they are appended, after ``after[p]`` for
    partition ``p``; ends when ``stop()`` is true (checked at least every
    :data:`POLL_S`) or when the caller stops iterating. A partition that cannot be read
    raises its error here."""
    if len(parts) == 1:
        yield from tailing.follow(
            parts[0].client, parts[0].keys, decisions=decisions, after=after[0], stop=stop
        )
        return
    arrived: queue.Queue[TailEntry | BaseException] = queue.Queue()
    finished = threading.Event()

    def read(part: Target, start: str) -> None:
        try:
            for entry in tailing.follow(
                part.client, part.keys, decisions=decisions, after=start, stop=finished.is_set
            ):
                arrived.put(entry)
        except BaseException as exc:  # handed to the caller's thread, raised there
            arrived.put(exc)

    threads = [
        threading.Thread(target=read, args=(part, start), name=f"tail-p{i}", daemon=True)
        for i, (part, start) in enumerate(zip(parts, after, strict=True))
    ]
    for thread in threads:
        thread.start()
    try:
        while not stop():
            try:
                item = arrived.get(timeout=POLL_S)
            except queue.Empty:
                continue
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        finished.set()
        for thread in threads:
            thread.join(JOIN_S)
