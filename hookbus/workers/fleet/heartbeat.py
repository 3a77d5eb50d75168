"""Worker heartbeats: who is alive, what it runs, how it is doing.

Every long-running worker role (chain, fanout, rq) writes one JSON object into the hash
``hookbus:{ns}:workers`` (field = worker id) every ``interval_ms``. Producers read the hash
to notice "no chain worker alive" at once, like NATS's "no responders", instead of waiting
out a deadline; ``hookbus status`` and ``hookbus reload --wait`` read it to show the fleet.

A hash rather than one key per worker with a TTL: one HGETALL lists the whole fleet, and a
dead worker's last entry stays visible (as dead) until :func:`prune_dead` removes it, which
is what an operator wants to see after a crash.

:class:`Heartbeat` writes the beats. The reading side is shared by producers ("no chain
worker alive"), ``hookbus status``, ``hookbus reload --wait`` and tests: :class:`WorkerInfo`
parses one entry (keeping fields a newer worker added), :func:`list_workers` /
:func:`alive_workers` list them and :func:`prune_dead` removes the long-dead ones.

Liveness is judged on Redis's clock alone: a beat is written by ``heartbeat.lua``, which
stamps ``last_ms`` with Redis's TIME, and readers compare it with Redis's TIME too. A
worker's own clock never enters: one whose host runs 45 s behind is alive, and a dead one
whose host ran 45 s ahead is dead ``dead_after_ms`` after its last beat.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis

from hookbus.bus import ids, lua
from hookbus.bus.connection import CONNECTION_ERRORS
from hookbus.bus.keys import Keys
from hookbus.bus.wire import now_ms

__all__ = ["Heartbeat", "new_worker_id"]

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


#: Errors a beat may meet: Redis gone, or Redis refusing the command.
_BEAT_ERRORS: tuple[type[BaseException], ...] = (*CONNECTION_ERRORS, redis.exceptions.RedisError)

#: How many recent durations the p50 / p99 in a heartbeat are computed from.
DURATION_WINDOW = 1024


def new_worker_id(role: str) -> str:
    """``<role>-<host>-<pid>-<4 random hex>``: readable in logs, unique across restarts."""
    return f"{role}-{socket.gethostname()}-{os.getpid()}-{ids.token(4)}"


def _quantile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, round(q * (len(sorted_values) - 1)))
    return sorted_values[index]


class Heartbeat:
    """Beats a worker's entry into the heartbeat hash from a daemon thread.

    ``info()`` supplies the role-specific fields (``version``, ``hooks``, ``problems`` from
    the hook host, plus anything else); the counters (``processed``, ``errors``, p50/p99)
    come from :meth:`record`. Redis trouble never kills the thread: a missed beat is logged
    and the next one tries again.
    """

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        *,
        role: str,
        interval_ms: int,
        info: Callable[[], dict[str, Any]],
        worker_id: str | None = None,
        concurrency: int = 1,
    ) -> None:
        self.client = client
        self.keys = keys
        self.role = role
        self.interval_ms = interval_ms
        self.worker_id = worker_id or new_worker_id(role)
        self.concurrency = concurrency
        self._info = info
        #: Redis time of the first beat (the local clock until then).
        self._started_ms = now_ms()
        self._started_stamped = False
        self._failing: str | None = None  # the kind of the failure of the last beat
        self._script = lua.register(client, "hookbus.workers.fleet", "heartbeat.lua")
        self._lock = threading.Lock()
        self._durations: deque[float] = deque(maxlen=DURATION_WINDOW)
        self._processed = 0
        self._errors = 0
        self._counters: dict[str, int] = {}
        self._hook_failures: dict[str, dict[str, int]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def record(self, duration_ms: float, error: bool) -> None:
        """Count one processed item (thread-safe, O(1))."""
        with self._lock:
            self._processed += 1
            if error:
                self._errors += 1
            self._durations.append(duration_ms)

    def count(self, name: str, n: int = 1) -> None:
        """Bump a role-specific counter (``expired``, ``dead_lettered``...) shown in beats."""
        with self._lock:
            self._counters[name] = self._counters.get(name, 0) + n

    def count_hook(self, hook_id: str, outcome: str) -> None:
        """Count one failed run (``timeout``, ``error``) of one hook: beats carry them as
        ``hook_failures`` ({hook: {outcome: n}}), so ``status`` names the hook at fault."""
        with self._lock:
            per_hook = self._hook_failures.setdefault(hook_id, {})
            per_hook[outcome] = per_hook.get(outcome, 0) + 1

    def payload(self) -> dict[str, Any]:
        """The heartbeat object as it is written, but for ``last_ms``, which Redis stamps
        (also handy for tests and status)."""
        with self._lock:
            durations = sorted(self._durations)
            counters: dict[str, Any] = dict(self._counters)
            if self._hook_failures:
                counters["hook_failures"] = {h: dict(n) for h, n in self._hook_failures.items()}
            processed, errors = self._processed, self._errors
        data: dict[str, Any] = {
            "id": self.worker_id,
            "role": self.role,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started_ms": self._started_ms,
            "version": None,
            "hooks": 0,
            "problems": [],
            "processed": processed,
            "errors": errors,
            "p50_ms": round(_quantile(durations, 0.50), 3),
            "p99_ms": round(_quantile(durations, 0.99), 3),
            "concurrency": self.concurrency,
        }
        data.update(counters)
        try:
            extra = self._info()
        except Exception:  # a broken info() must not stop the beats
            log.exception("heartbeat info() of %s failed", self.worker_id)
            extra = {}
        for key, value in extra.items():
            if key not in ("id", "role", "last_ms", "started_ms"):
                data[key] = value
        return data

    def beat_now(self) -> bool:
        """Write one beat now; False (logged) when Redis cannot be reached."""
        try:
            stamp = self._script(
                keys=[self.keys.workers], args=[self.worker_id, json.dumps(self.payload())]
            )
        except CONNECTION_ERRORS as exc:
            self._failed("not written", exc)
            return False
        except redis.exceptions.RedisError as exc:
            self._failed("refused", exc)
            return False
        if self._failing:
            log.info("heartbeat of %s written again", self.worker_id)
            self._failing = None
        if not self._started_stamped:
            self._started_ms, self._started_stamped = int(stamp), True
        return True

    def _failed(self, how: str, exc: BaseException) -> None:
        """Log a missed beat: a warning when the failure is new, debug while it lasts (a
        Redis out of memory refuses every beat for as long as it is full)."""
        kind = f"{how}: {type(exc).__name__}"
        level = logging.DEBUG if kind == self._failing else logging.WARNING
        self._failing = kind
        log.log(level, "heartbeat of %s %s: %s", self.worker_id, how, exc)

    def _run(self) -> None:
        interval_s = self.interval_ms / 1000
        while not self._stop.wait(interval_s):
            self.beat_now()

    def start(self) -> Heartbeat:
        """Beat once now (so producers see the worker at once), then every interval."""
        self.beat_now()
        self._thread = threading.Thread(
            target=self._run, name=f"heartbeat-{self.worker_id}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self, *, remove: bool = True) -> None:
        """Stop beating; on a clean stop remove the entry so nobody counts on this worker."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=max(1.0, 2 * self.interval_ms / 1000))
        if remove:
            try:
                self.client.hdel(self.keys.workers, self.worker_id)
            except _BEAT_ERRORS as exc:
                log.warning("heartbeat of %s not removed: %s", self.worker_id, exc)

    def __enter__(self) -> Heartbeat:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
