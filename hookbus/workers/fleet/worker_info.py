"""Reading the heartbeat hash: who is alive, what it runs, how it is doing.

Every long-running worker role writes one JSON object into ``hookbus:{ns}:workers`` (field =
worker id); :class:`~hookbus.workers.fleet.heartbeat.Heartbeat` writes it. This module is the
reading side, shared by producers ("no chain worker alive"), ``hookbus status``,
``hookbus reload --wait`` and tests: :class:`WorkerInfo` parses one entry (keeping fields a
newer worker added), :func:`list_workers` / :func:`alive_workers` list them and
:func:`prune_dead` removes the long-dead ones. Beats are stamped with Redis's clock and
judged against it (:func:`redis_now_ms`), never against this host's.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

import redis

from hookbus.bus.keys import Keys

log = logging.getLogger(__name__)

#: Fields every heartbeat carries (the contract ``hookbus status`` reads).
HEARTBEAT_FIELDS = (
    "id",
    "role",
    "host",
    "pid",
    "started_ms",
    "last_ms",
    "version",
    "hooks",
    "problems",
    "processed",
    "errors",
    "p50_ms",
    "p99_ms",
    "concurrency",
)


@dataclass(frozen=True)
class WorkerInfo:
    """One parsed heartbeat entry. ``extra`` keeps fields a newer worker added."""

    id: str
    role: str
    host: str = ""
    pid: int = 0
    started_ms: int = 0
    last_ms: int = 0
    version: str | None = None
    hooks: int = 0
    problems: list[str] = field(default_factory=list)
    processed: int = 0
    errors: int = 0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    concurrency: int = 1
    extra: dict[str, Any] = field(default_factory=dict)

    def alive(self, now_ms: int, dead_after_ms: int) -> bool:
        """True when the last beat is more recent than ``dead_after_ms`` ago."""
        return now_ms - self.last_ms < dead_after_ms

    def to_dict(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in HEARTBEAT_FIELDS}
        data.update(self.extra)
        return data

    @classmethod
    def parse(cls, worker_id: str, raw: bytes | str) -> WorkerInfo | None:
        """The entry, or None when it is not a JSON object (logged, never raised)."""
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            log.warning("heartbeat of %s is not JSON; ignoring it", worker_id)
            return None
        if not isinstance(data, dict):
            return None
        known = {k: data[k] for k in HEARTBEAT_FIELDS if k in data and k != "id"}
        extra = {k: v for k, v in data.items() if k not in HEARTBEAT_FIELDS}
        try:
            return cls(id=str(data.get("id", worker_id)), extra=extra, **known)
        except TypeError:
            return None


def redis_now_ms(client: redis.Redis) -> int:
    """Redis's clock (TIME), in epoch ms: what heartbeats are stamped and judged with."""
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def list_workers(client: redis.Redis, keys: Keys) -> list[WorkerInfo]:
    """Every worker in the heartbeat hash (alive or not), sorted by role then id."""
    raw: dict[bytes, bytes] = client.hgetall(keys.workers)  # type: ignore[assignment]
    found: list[WorkerInfo] = []
    for wid, value in raw.items():
        info = WorkerInfo.parse(wid.decode() if isinstance(wid, bytes) else str(wid), value)
        if info is not None:
            found.append(info)
    found.sort(key=lambda w: (w.role, w.id))
    return found


def alive_workers(
    client: redis.Redis, keys: Keys, *, dead_after_ms: int, role: str | None = None
) -> list[WorkerInfo]:
    """The workers (of ``role``, when given) whose last beat is recent enough."""
    now = redis_now_ms(client)
    return [
        w
        for w in list_workers(client, keys)
        if w.alive(now, dead_after_ms) and (role is None or w.role == role)
    ]


def prune_dead(client: redis.Redis, keys: Keys, prune_after_ms: int) -> list[str]:
    """Remove entries whose last beat is older than ``prune_after_ms``; returns their ids."""
    now = redis_now_ms(client)
    stale = [w.id for w in list_workers(client, keys) if not w.alive(now, prune_after_ms)]
    if stale:
        client.hdel(keys.workers, *stale)
    return stale
