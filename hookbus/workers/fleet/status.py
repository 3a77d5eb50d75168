"""What ``hookbus status`` knows about a fleet, as data.

Gathering is kept apart from printing so the CLI, the benchmark and tests share it: the
current bundle, every worker's heartbeat (alive or dead, long-dead ones pruned), the
streams (length, consumer-group pending and lag) and the RQ queues (queued, started,
failed). With ``partitions`` > 1 the request, event, decision and dead-letter streams are
listed once per partition (``requests p1``...; on a Redis Cluster each read on the master
serving it), so the lag of every partition shows, not only partition 0's. How far behind
one stream or queue is, is read by :mod:`hookbus.workers.fleet.backlog`;
how a reload proves it took (every live worker runs a version) is
:mod:`hookbus.workers.reload.acks`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import redis

from hookbus.bundles.model import BundleMeta
from hookbus.bundles.store import current_version, fetch_meta
from hookbus.bus.connection import WRITE_PROBE_ID, client_url, probe_writes, translated
from hookbus.bus.keys import Keys
from hookbus.workers.fleet.backlog import QueueStatus, StreamStatus, queue_status, stream_status
from hookbus.workers.fleet.heartbeat import (
    WorkerInfo,
    list_workers,
    prune_dead,
    redis_now_ms,
)
from hookbus.workers.fleet.stream_health import StreamProblem, check_streams
from hookbus.workers.unguarded import report
from hookbus.workers.unguarded.report import UnguardedCall

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings

log = logging.getLogger(__name__)


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
class FleetStatus:
    """Everything ``hookbus status`` prints, gathered in one pass."""

    namespace: str
    now_ms: int
    bundle_version: str | None
    bundle: BundleMeta | None
    workers: list[WorkerStatus]
    streams: list[StreamStatus]
    queues: list[QueueStatus]
    pruned: list[str] = field(default_factory=list)
    #: What Redis answers a write now when it refuses writes (OOM, MISCONF), else None.
    refused: str | None = None
    #: Streams the fleet cannot write or read as it should (exhausted ids, ids ahead of
    #: Redis's clock, a missing group, Redis BUSY): ``hookbus status`` exits 1 on any.
    stream_problems: list[StreamProblem] = field(default_factory=list)
    #: The latest tool calls that ran with no guard asked, newest first, and how many
    #: there were per (agent, CLI).
    unguarded: list[UnguardedCall] = field(default_factory=list)
    unguarded_counts: dict[tuple[str, str], int] = field(default_factory=dict)

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
                    "partition": s.partition,
                    "lost": s.lost,
                    "groups": [g.__dict__ for g in s.groups],
                }
                for s in self.streams
            ],
            "queues": [q.__dict__ for q in self.queues],
            "pruned": self.pruned,
            "refused": self.refused,
            "stream_problems": [p.to_dict() for p in self.stream_problems],
            "unguarded": [call.to_dict() for call in self.unguarded],
            "unguarded_counts": [
                {"agent": agent, "cli": cli, "count": n}
                for (agent, cli), n in sorted(self.unguarded_counts.items())
            ],
            "judges": judge_totals(self.workers),
            "notifications_failed": notifications_failed(self.workers),
        }


def notifications_failed(workers: list[WorkerStatus]) -> int:
    """Approval notifications the live chain workers gave up on (each retried with backoff
    first): an operator who relies on them is not being told."""
    return sum(int(w.info.extra.get("notifications_failed") or 0) for w in workers if w.alive)


def judge_totals(workers: list[WorkerStatus]) -> dict[str, dict[str, Any]]:
    """What each judge hook's model cost, summed over the live workers' heartbeats: model
    calls, verdicts shared from the cache, tokens, failures by cause and the slowest
    worker's median call (ms, None before the first call)."""
    totals: dict[str, dict[str, Any]] = {}
    for w in workers:
        judges = w.info.extra.get("judges") if w.alive else None
        if not isinstance(judges, dict):
            continue
        for hook, stats in judges.items():
            if not isinstance(stats, dict):
                continue
            total = totals.setdefault(
                hook, {"calls": 0, "served": 0, "tokens": 0, "failures": {}, "p50_ms": None}
            )
            for name in ("calls", "served", "tokens"):
                total[name] += int(stats.get(name) or 0)
            for cause, n in (stats.get("failures") or {}).items():
                total["failures"][cause] = total["failures"].get(cause, 0) + int(n)
            if stats.get("p50_ms") is not None:
                total["p50_ms"] = max(total["p50_ms"] or 0.0, float(stats["p50_ms"]))
    return dict(sorted(totals.items()))


def gather(
    client: redis.Redis,
    settings: Settings,
    *,
    rq_client: redis.Redis | None = None,
    prune: bool = True,
) -> FleetStatus:
    """One consistent-enough snapshot of the fleet (several reads, not a transaction).

    Read only while Redis refuses writes (it says why in ``refused``): the prune of
    long-dead workers, the one write, is left for later."""
    keys = Keys.for_namespace(settings.namespace)
    with translated(client_url(client)):
        refusal = probe_writes(client, keys.inbox(WRITE_PROBE_ID))
        prune = prune and refusal is None
        pruned = prune_dead(client, keys, settings.workers.prune_after_ms) if prune else []
        version = current_version(client, keys)
        meta = fetch_meta(client, keys, version) if version else None
        now = redis_now_ms(client)  # beats are stamped with Redis's clock
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
            stream
            for name in PARTITIONED_STREAMS
            for stream in partition_streams(client, settings, name)
        ]
        problems = stream_problems(client, settings, workers)
        unguarded = report.recent(client, settings)
        unguarded_counts = report.counts(client, settings)
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
        refused=None if refusal is None else str(refusal),
        stream_problems=problems,
        unguarded=unguarded,
        unguarded_counts=unguarded_counts,
    )


def stream_problems(
    client: redis.Redis, settings: Settings, workers: list[WorkerStatus]
) -> list[StreamProblem]:
    """The request and event streams of every partition, checked (see
    :mod:`hookbus.workers.fleet.stream_health`); a missing stream or group counts only while
    a worker that reads the stream has been alive for :data:`GROUP_GRACE_MS` (it makes its
    group when it starts; before the first worker there is none)."""
    from hookbus.bus.connection import is_cluster_url, partition_client
    from hookbus.bus.keys import CHAIN_GROUP, FANOUT_GROUP

    roles = {w.info.role for w in workers if w.alive and w.uptime_ms >= GROUP_GRACE_MS}
    on_cluster = is_cluster_url(settings.effective_redis_url)
    found: list[StreamProblem] = []
    for partition in range(settings.partitions):
        keys = Keys.for_partition(settings.namespace, partition)
        here = partition_client(settings, partition) if on_cluster and partition else client
        found.extend(
            check_streams(
                here,
                [
                    (keys.requests, CHAIN_GROUP, "chain" in roles),
                    (keys.events, FANOUT_GROUP, "fanout" in roles),
                ],
            )
        )
    return found


#: How long a worker must have run before its stream's missing group is a problem, in ms.
GROUP_GRACE_MS = 5_000

#: The streams status lists, each once per partition: name -> :class:`Keys` attribute.
PARTITIONED_STREAMS = {
    "requests": "requests",
    "events": "events",
    "decisions": "decisions",
    "dead letters": "dead_letters",
}


def partition_name(name: str, partition: int) -> str:
    """How status names a partition's stream: ``events`` for partition 0 (as before
    partitions), ``events p2`` for partition 2."""
    return name if partition == 0 else f"{name} p{partition}"


def partition_streams(client: redis.Redis, settings: Settings, name: str) -> list[StreamStatus]:
    """Length, pending and lag of every partition of one of :data:`PARTITIONED_STREAMS`.

    ``client`` serves the namespace's own slot (partition 0); on a Redis Cluster every other
    partition is read on the master serving it (:func:`partition_client`).
    """
    from hookbus.bus.connection import is_cluster_url, partition_client

    on_cluster = is_cluster_url(settings.effective_redis_url)
    out = []
    for partition in range(settings.partitions):
        keys = Keys.for_partition(settings.namespace, partition)
        here = partition_client(settings, partition) if on_cluster and partition else client
        key = getattr(keys, PARTITIONED_STREAMS[name])
        with translated(client_url(here)):
            out.append(stream_status(here, partition_name(name, partition), key, partition))
    return out
