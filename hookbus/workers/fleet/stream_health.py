"""Streams the fleet can no longer write: found, reported and recovered without losing entries.

Redis ACLs cannot restrict a command's arguments, so whoever holds a Redis user with ``XADD``
on the request or event stream can give an entry an explicit id. An id ahead of Redis's clock
makes every later ``XADD *`` take ids from that future (the worker's deadline arithmetic
reads Redis time from them), and the largest id (``18446744073709551615-18446744073709551615``)
makes every later ``XADD`` fail with ``The stream has exhausted the last possible ID``: every
request of every agent fails, the operator's included, and nothing heals it by itself. A
deleted or expired stream loses its consumer group (``NOGROUP``) until a worker recreates it.

:func:`check_streams` finds these (and a Redis answering ``BUSY`` to everyone while a script
runs) for ``hookbus status`` and the metrics; :class:`StreamWarden`, a thread of every chain
worker and fan-out dispatcher, checks its stream a few times a second and recovers it:
``stream_recover.lua`` moves the poisoned stream aside and recreates it with its group in one
step, so producers write again at once, then the entries not yet delivered are copied into
the new stream (new ids; the poisoning entries themselves are left out) and the aside copy is
deleted once nothing in it is pending (else it expires after :data:`ASIDE_TTL_MS`, for the
answers still in flight to be acknowledged nowhere harmful).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import redis

from hookbus.bus import lua
from hookbus.bus.keys import CHAIN_GROUP, FANOUT_GROUP, Keys, stream_aside

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

log = logging.getLogger(__name__)

Problem = Literal["exhausted", "ahead", "no_group", "busy"]

#: An entry id this far ahead of Redis's clock counts as poisoned, in ms.
AHEAD_LIMIT_MS = 60_000
#: How often a warden checks its stream, in seconds.
WARDEN_INTERVAL_S = 0.25
#: How long a moved-aside stream with entries still pending is kept, in ms.
ASIDE_TTL_MS = 3_600_000
#: Entries read per XRANGE while draining a moved-aside stream.
DRAIN_BATCH = 500
#: The largest stream id's milliseconds part: a stream whose last id has it is exhausted.
MAX_ID_MS = 2**64 - 1


@dataclass(frozen=True)
class StreamProblem:
    """A stream the fleet cannot use as it should: ``problem`` and what to know about it."""

    key: str
    group: str
    problem: Problem
    detail: str

    def line(self) -> str:
        return f"{self.key}: {self.detail}"

    def to_dict(self) -> dict[str, str]:
        return {
            "key": self.key,
            "group": self.group,
            "problem": self.problem,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class Recovery:
    """What a recovery did: where the old stream went and how many entries it carried over."""

    key: str
    aside: str
    copied: int
    skipped: int
    pending_left: int


def _ms_of(entry_id: Any) -> int:
    text = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
    return int(text.partition("-")[0])


def _redis_now_ms(client: redis.Redis) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def check_stream(
    client: redis.Redis, key: str, group: str, *, expect_group: bool = True
) -> StreamProblem | None:
    """The problem of one stream, or None. A missing stream or group is one only when
    ``expect_group`` (a worker that reads it is alive: before the first worker starts there
    is none, and the first XADD makes the stream). Raises redis-py errors (``BUSY``
    included: see :func:`busy_problem`)."""
    try:
        info = client.xinfo_stream(key)
    except redis.exceptions.ResponseError as exc:
        if "no such key" not in str(exc).lower():
            raise
        if not expect_group:
            return None
        return StreamProblem(
            key, group, "no_group", "MISSING: the stream and its group are gone (deleted?)"
        )
    last = info.get("last-generated-id") or b"0-0"
    last_ms = _ms_of(last)
    if last_ms >= MAX_ID_MS:
        return StreamProblem(
            key, group, "exhausted", "EXHAUSTED: its ids reached the largest one; every XADD fails"
        )
    now = _redis_now_ms(client)
    if last_ms > now + AHEAD_LIMIT_MS:
        ahead_s = (last_ms - now) // 1000
        return StreamProblem(
            key, group, "ahead", f"AHEAD: its last id is {ahead_s} s ahead of Redis's clock"
        )
    if expect_group:
        groups = client.xinfo_groups(key)
        names = {g.get("name") for g in groups}
        if group not in names and group.encode() not in names:
            return StreamProblem(
                key, group, "no_group", f"NO GROUP: consumer group {group!r} is missing"
            )
    return None


def busy_problem(exc: BaseException, key: str = "") -> StreamProblem | None:
    """A ``BUSY`` answer (a script or function is running: Redis refuses every other
    client until it ends or ``SCRIPT KILL``) as a problem; None for any other error."""
    if isinstance(exc, redis.exceptions.BusyLoadingError):
        return None
    if "BUSY" in str(exc).split(" ", 1)[0] or str(exc).startswith("BUSY"):
        return StreamProblem(
            key, "", "busy", "BUSY: Redis runs a script and refuses every client (SCRIPT KILL)"
        )
    return None


def check_streams(client: redis.Redis, streams: list[tuple[str, str, bool]]) -> list[StreamProblem]:
    """:func:`check_stream` of each ``(key, group, expect_group)``; a Redis answering
    ``BUSY`` is one problem for them all."""
    found = []
    for key, group, expect_group in streams:
        try:
            problem = check_stream(client, key, group, expect_group=expect_group)
        except redis.exceptions.ResponseError as exc:
            busy = busy_problem(exc)
            if busy is None:
                raise
            return [busy]
        if problem is not None:
            found.append(problem)
    return found


def recover(client: redis.Redis, key: str, group: str, *, maxlen: int) -> Recovery | None:
    """Move a poisoned stream aside, recreate it with ``group``, and copy the entries its
    group had not yet delivered into it (the poisoning ones left out). None when the stream
    was healthy when the script looked (another worker may have recovered it)."""
    now = _redis_now_ms(client)
    aside = stream_aside(key, now)
    moved = client.eval(
        lua.source("hookbus.workers.fleet", "stream_recover.lua"),
        2,
        key,
        aside,
        group,
        AHEAD_LIMIT_MS,
    )
    if not moved:
        return None
    copied = skipped = 0
    limit = now + AHEAD_LIMIT_MS
    for batch in _undelivered(client, aside, group):
        pipe = client.pipeline(transaction=False)
        for entry_id, fields in batch:
            if _ms_of(entry_id) > limit:
                skipped += 1
                continue
            pipe.xadd(key, fields, maxlen=maxlen, approximate=True)
            copied += 1
        pipe.execute()
    pending = _pending(client, aside, group)
    if pending:
        client.pexpire(aside, ASIDE_TTL_MS)
    else:
        client.delete(aside)
    return Recovery(key=key, aside=aside, copied=copied, skipped=skipped, pending_left=pending)


def _undelivered(client: redis.Redis, key: str, group: str) -> Iterator[list[Any]]:
    """Batches of the entries of ``key`` after ``group``'s last-delivered id."""
    start = "-"
    for g in client.xinfo_groups(key):
        if g.get("name") in (group, group.encode()):
            delivered = g.get("last-delivered-id") or b"0-0"
            start = "(" + (delivered.decode() if isinstance(delivered, bytes) else str(delivered))
    while True:
        batch = client.xrange(key, start, "+", count=DRAIN_BATCH)
        if not batch:
            return
        yield batch
        if len(batch) < DRAIN_BATCH:
            return
        last = batch[-1][0]
        start = "(" + (last.decode() if isinstance(last, bytes) else str(last))


def _pending(client: redis.Redis, key: str, group: str) -> int:
    try:
        summary = client.xpending(key, group)
    except redis.exceptions.ResponseError:
        return 0
    return int(summary.get("pending", 0) if isinstance(summary, dict) else 0)


class StreamWarden(threading.Thread):
    """Checks one stream every :data:`WARDEN_INTERVAL_S` and recovers it when it can no
    longer be written; logs each new problem once at ERROR and each recovery at WARNING.
    ``problem`` (the current one, or None) and ``recoveries`` are read by heartbeats,
    metrics and tests."""

    def __init__(
        self,
        client: redis.Redis,
        key: str,
        group: str,
        *,
        maxlen: int,
        stop_event: threading.Event,
        interval_s: float = WARDEN_INTERVAL_S,
    ) -> None:
        super().__init__(name=f"hookbus-warden-{key}", daemon=True)
        self.client = client
        self.key = key
        self.group = group
        self.maxlen = maxlen
        self.stop_event = stop_event
        self.interval_s = interval_s
        self.problem: StreamProblem | None = None
        self.recoveries: list[Recovery] = []
        #: whether this process should watch the stream now: a chain worker watches only the
        #: partitions it reads (their readers recover them), so idle checks grow with the
        #: readers, not with the fleet
        self.active: Callable[[], bool] = lambda: True

    def run(self) -> None:
        while not self.stop_event.wait(self.interval_s):
            if not self.active():
                continue
            try:
                self.check_once()
            except (redis.exceptions.RedisError, OSError) as exc:
                busy = busy_problem(exc, self.key)
                if busy is not None:
                    self._report(busy)
                else:
                    log.debug("stream check of %s failed: %s", self.key, exc)

    def check_once(self) -> Recovery | None:
        """One check, and the recovery when the stream is poisoned."""
        problem = check_stream(self.client, self.key, self.group)
        self._report(problem)
        if problem is None:
            return None
        if problem.problem == "no_group":
            self._recreate_group()
            return None
        done = recover(self.client, self.key, self.group, maxlen=self.maxlen)
        if done is not None:
            self.recoveries.append(done)
            log.warning(
                "stream %s recovered: moved aside to %s, %d undelivered entries copied back, "
                "%d poisoned left out, %d pending left there",
                self.key,
                done.aside,
                done.copied,
                done.skipped,
                done.pending_left,
            )
            self._report(None)
        return done

    def _recreate_group(self) -> None:
        """A deleted (or expired) stream loses its group: make both again, from the start,
        so what producers added meanwhile is read."""
        try:
            self.client.xgroup_create(self.key, self.group, id="0", mkstream=True)
        except redis.exceptions.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
            return
        log.warning("stream %s had no group %r: recreated", self.key, self.group)
        self._report(None)

    def _report(self, problem: StreamProblem | None) -> None:
        if problem is not None and problem != self.problem:
            log.error("stream %s cannot be written: %s", self.key, problem.detail)
        self.problem = problem


class StreamHealthCollector:
    """``hookbus_stream_unwritable{stream, problem}`` at scrape time: 1 for each stream of
    the role that cannot be written as it should (0 rows when all is well)."""

    def __init__(self, client: redis.Redis, streams: list[tuple[str, str]]) -> None:
        self.client = client
        self.streams = streams

    def describe(self) -> list[Any]:
        return []  # collected lazily: no describe-time Redis round trip

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        gauge = GaugeMetricFamily(
            "hookbus_stream_unwritable",
            "1 per stream the fleet cannot write: exhausted ids, ids ahead of Redis's clock, "
            "a missing group, Redis BUSY.",
            labels=["stream", "problem"],
        )
        try:
            found = check_streams(self.client, [(k, g, True) for k, g in self.streams])
        except (redis.exceptions.RedisError, OSError) as exc:
            log.warning("metrics scrape could not check the streams: %s", exc)
            found = []
        for problem in found:
            gauge.add_metric([problem.key, problem.problem], 1)
        yield gauge


def role_collector(client: redis.Redis, namespace: str, role: str) -> StreamHealthCollector:
    """The collector of the stream a worker role reads (partition 0's: the one the
    worker's own client serves)."""
    keys = Keys.for_namespace(namespace)
    streams = {
        "chain": [(keys.requests, CHAIN_GROUP)],
        "fanout": [(keys.events, FANOUT_GROUP)],
    }
    return StreamHealthCollector(client, streams.get(role, []))
