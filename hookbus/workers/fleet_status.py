"""What ``hookbus status`` and ``hookbus reload --wait`` know about a fleet, as data.

Gathering is kept apart from printing so the CLI, the benchmark and tests share it: the
current bundle, every worker's heartbeat (alive or dead, long-dead ones pruned), the
streams (length, consumer-group pending and lag) and the RQ queues (queued, started,
failed). :func:`wait_for_acks` polls the heartbeat hash until every live worker runs a
version, which is how a reload proves it took.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import redis

from hookbus.bus import bundle_pack, bundle_store
from hookbus.bus.connection import CONNECTION_ERRORS, client_url, translated
from hookbus.bus.keys import Keys
from hookbus.bus.wire import now_ms
from hookbus.workers.heartbeat import WorkerInfo, list_workers, prune_dead

if TYPE_CHECKING:
    from hookbus.bus.settings import Settings

log = logging.getLogger(__name__)

#: How often ``wait_for_acks`` re-reads the heartbeat hash, in seconds.
ACK_POLL_INTERVAL_S = 0.005


@dataclass(frozen=True)
class WorkerStatus:
    """One worker as ``hookbus status`` shows it."""

    info: WorkerInfo
    alive: bool
    uptime_ms: int
    last_seen_ms: int

    def to_dict(self) -> dict[str, Any]:
        data = self.info.to_dict()
        data.update(alive=self.alive, uptime_ms=self.uptime_ms, last_seen_ms=self.last_seen_ms)
        return data


@dataclass(frozen=True)
class GroupStatus:
    """A consumer group of a stream: consumers, delivered-but-unacknowledged, not yet read."""

    name: str
    consumers: int
    pending: int
    lag: int | None


@dataclass(frozen=True)
class StreamStatus:
    name: str
    key: str
    length: int
    groups: list[GroupStatus] = field(default_factory=list)


@dataclass(frozen=True)
class QueueStatus:
    name: str
    queued: int
    started: int
    failed: int
    error: str | None = None


@dataclass(frozen=True)
class FleetStatus:
    """Everything ``hookbus status`` prints, gathered in one pass."""

    namespace: str
    now_ms: int
    bundle_version: str | None
    bundle: bundle_pack.BundleMeta | None
    workers: list[WorkerStatus]
    streams: list[StreamStatus]
    queues: list[QueueStatus]
    pruned: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        meta = self.bundle
        return {
            "namespace": self.namespace,
            "now_ms": self.now_ms,
            "bundle": {
                "version": self.bundle_version,
                "hooks": meta.hooks if meta else None,
                "who": meta.who if meta else None,
                "created_ms": meta.created_ms if meta else None,
            },
            "workers": [w.to_dict() for w in self.workers],
            "streams": [
                {
                    "name": s.name,
                    "key": s.key,
                    "length": s.length,
                    "groups": [g.__dict__ for g in s.groups],
                }
                for s in self.streams
            ],
            "queues": [q.__dict__ for q in self.queues],
            "pruned": self.pruned,
        }


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def stream_status(client: redis.Redis, name: str, key: str) -> StreamStatus:
    """Length and groups of one stream (zeros when it does not exist yet)."""
    length = _int(client.xlen(key))
    groups: list[GroupStatus] = []
    if length or client.exists(key):
        try:
            raw_groups: list[dict[Any, Any]] = client.xinfo_groups(key)
        except redis.exceptions.ResponseError:
            raw_groups = []
        for g in raw_groups:
            data = {_text(k): v for k, v in g.items()}
            lag = data.get("lag")
            groups.append(
                GroupStatus(
                    name=_text(data.get("name", "?")),
                    consumers=_int(data.get("consumers")),
                    pending=_int(data.get("pending")),
                    lag=None if lag is None else _int(lag),
                )
            )
    return StreamStatus(name=name, key=key, length=length, groups=groups)


def queue_status(rq_client: redis.Redis, queue_name: str) -> QueueStatus:
    """Queued, started and failed job counts of an RQ queue."""
    try:
        from rq import Queue

        queue = Queue(queue_name, connection=rq_client)
        return QueueStatus(
            name=queue_name,
            queued=queue.count,
            started=queue.started_job_registry.count,
            failed=queue.failed_job_registry.count,
        )
    except CONNECTION_ERRORS as exc:
        return QueueStatus(name=queue_name, queued=0, started=0, failed=0, error=str(exc))


def gather(
    client: redis.Redis,
    settings: Settings,
    *,
    rq_client: redis.Redis | None = None,
    prune: bool = True,
) -> FleetStatus:
    """One consistent-enough snapshot of the fleet (several reads, not a transaction)."""
    keys = Keys.for_namespace(settings.namespace)
    with translated(client_url(client)):
        pruned = prune_dead(client, keys, settings.workers.prune_after_ms) if prune else []
        version = bundle_store.current_version(client, keys)
        meta = bundle_store.fetch_meta(client, keys, version) if version else None
        now = now_ms()
        workers = [
            WorkerStatus(
                info=w,
                alive=w.alive(now, settings.workers.dead_after_ms),
                uptime_ms=max(0, w.last_ms - w.started_ms),
                last_seen_ms=max(0, now - w.last_ms),
            )
            for w in list_workers(client, keys)
        ]
        streams = [
            stream_status(client, "requests", keys.requests),
            stream_status(client, "events", keys.events),
            stream_status(client, "decisions", keys.decisions),
            stream_status(client, "dead letters", keys.dead_letters),
        ]
    rq = rq_client if rq_client is not None else client
    with translated(client_url(rq)):
        queues = [queue_status(rq, keys.rq_queue)]
    return FleetStatus(
        namespace=settings.namespace,
        now_ms=now,
        bundle_version=version,
        bundle=meta,
        workers=workers,
        streams=streams,
        queues=queues,
        pruned=pruned,
    )


# --- acks -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ack:
    """One live worker's answer to a reload: the version it runs and how long it took."""

    worker: WorkerInfo
    switched: bool
    after_ms: float | None  # from the start of the wait to the first beat with the version

    def to_dict(self) -> dict[str, Any]:
        w = self.worker
        return {
            "id": w.id,
            "role": w.role,
            "host": w.host,
            "pid": w.pid,
            "version": w.version,
            "hooks": w.hooks,
            "problems": w.problems,
            "switched": self.switched,
            "after_ms": None if self.after_ms is None else round(self.after_ms, 2),
        }


@dataclass(frozen=True)
class AckReport:
    version: str
    acks: list[Ack]
    waited_ms: float

    @property
    def ok(self) -> bool:
        """True when every live worker switched (vacuously when none is live)."""
        return all(a.switched for a in self.acks)

    @property
    def last_ack_ms(self) -> float | None:
        times = [a.after_ms for a in self.acks if a.after_ms is not None]
        return max(times) if times else None


def wait_for_acks(
    client: redis.Redis,
    settings: Settings,
    version: str,
    *,
    timeout_s: float,
    on_ack: Callable[[Ack], None] | None = None,
    poll_interval_s: float = ACK_POLL_INTERVAL_S,
    roles: tuple[str, ...] | None = None,
) -> AckReport:
    """Wait until every live worker's heartbeat names ``version`` (or ``timeout_s``).

    "Live" is decided on each poll (``workers.dead_after_ms``), so a worker that dies while
    we wait stops counting and one that starts counts from its first beat. ``on_ack`` is
    called once per worker as it switches.
    """
    keys = Keys.for_namespace(settings.namespace)
    dead_after = settings.workers.dead_after_ms
    start = time.perf_counter()
    deadline = start + timeout_s
    acked: dict[str, Ack] = {}
    latest: dict[str, WorkerInfo] = {}
    while True:
        now = now_ms()
        with translated(client_url(client)):
            found = list_workers(client, keys)
        elapsed_ms = (time.perf_counter() - start) * 1000
        live = {
            w.id: w
            for w in found
            if w.alive(now, dead_after) and (roles is None or w.role in roles)
        }
        latest = live
        for wid, w in live.items():
            if wid not in acked and w.version == version:
                ack = Ack(worker=w, switched=True, after_ms=elapsed_ms)
                acked[wid] = ack
                if on_ack is not None:
                    on_ack(ack)
        if all(wid in acked for wid in live) or time.perf_counter() >= deadline:
            break
        time.sleep(poll_interval_s)
    acks = [
        acked.get(wid, Ack(worker=w, switched=False, after_ms=None))
        for wid, w in sorted(latest.items(), key=lambda item: (item[1].role, item[0]))
    ]
    # refresh the acked workers' rows with their latest beat (problems may have changed)
    acks = [
        Ack(worker=latest.get(a.worker.id, a.worker), switched=a.switched, after_ms=a.after_ms)
        for a in acks
    ]
    return AckReport(version=version, acks=acks, waited_ms=(time.perf_counter() - start) * 1000)
