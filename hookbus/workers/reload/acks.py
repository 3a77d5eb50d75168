"""How a reload proves it took: wait until every live worker's heartbeat names the version.

:func:`wait_for_acks` polls the heartbeat hash (``hookbus reload --wait``, the reload
benchmark) and answers one :class:`Ack` per live worker: whether it switched, how long after
the push, whether it loaded every hook. A worker that refused the version (a hook able to
decide could not be loaded there: it kept its complete set) answers at once. A reload took
only when every live worker runs the version with no problem. Apart from
:mod:`hookbus.workers.fleet.status` (a one-pass snapshot): this is a loop with a deadline.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hookbus.bus.connection import client_url, translated
from hookbus.bus.keys import Keys
from hookbus.workers.fleet.heartbeat import WorkerInfo, list_workers, redis_now_ms

if TYPE_CHECKING:
    import redis

    from hookbus.bus.settings.loader import Settings

#: How often ``wait_for_acks`` re-reads the heartbeat hash, in seconds.
ACK_POLL_INTERVAL_S = 0.005


@dataclass(frozen=True)
class Ack:
    """One live worker's answer to a reload: the version it runs and how long it took."""

    worker: WorkerInfo
    switched: bool
    after_ms: float | None  # from the start of the wait to the first beat with the version
    refusal: str | None = None  # why the worker refused the version, when it did

    @property
    def loaded_all(self) -> bool:
        """Switched, with every hook of the version loaded (no problem reported)."""
        return self.switched and not self.worker.problems

    def failure(self) -> str | None:
        """What went wrong on this worker, in one line; None when it loaded everything."""
        w = self.worker
        if self.refusal is not None:
            what = f"refused it: {self.refusal}"
        elif not self.switched:
            what = f"did not switch in time (runs {w.version})"
        elif w.problems:
            what = f"did not load every hook: {'; '.join(w.problems)}"
        else:
            return None
        return f"{w.id} ({w.role}@{w.host}) {what}"

    def to_dict(self) -> dict[str, Any]:
        w = self.worker
        fields = ("id", "role", "host", "pid", "version", "hooks", "problems")
        return {
            **{name: getattr(w, name) for name in fields},
            "switched": self.switched,
            "loaded_all": self.loaded_all,
            "refusal": self.refusal,
            "after_ms": None if self.after_ms is None else round(self.after_ms, 2),
        }


@dataclass(frozen=True)
class AckReport:
    version: str
    acks: list[Ack]
    waited_ms: float

    @property
    def ok(self) -> bool:
        """Every live worker switched and loaded every hook (vacuously when none is live)."""
        return all(a.loaded_all for a in self.acks)

    def failures(self) -> list[str]:
        """One line per live worker on which the reload did not fully take."""
        return [line for line in (a.failure() for a in self.acks) if line is not None]

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
    """Wait until every live worker's heartbeat names ``version`` or refuses it (or
    ``timeout_s``). "Live" is decided on each poll (``workers.dead_after_ms``): a worker that
    dies meanwhile stops counting, one that starts counts from its first beat. ``on_ack`` is
    called once per worker as it switches."""
    keys = Keys.for_namespace(settings.namespace)
    dead_after = settings.workers.dead_after_ms
    start = time.perf_counter()
    deadline = start + timeout_s
    acked: dict[str, Ack] = {}
    refused: dict[str, str] = {}
    latest: dict[str, WorkerInfo] = {}
    while True:
        with translated(client_url(client)):
            now = redis_now_ms(client)  # beats are stamped with Redis's clock
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
            if wid not in acked and (reason := refusal_of(w, version)) is not None:
                refused[wid] = reason
        done = all(wid in acked or wid in refused for wid in live)
        if done or time.perf_counter() >= deadline:
            break
        time.sleep(poll_interval_s)
    acks = [
        acked.get(wid, Ack(worker=w, switched=False, after_ms=None, refusal=refused.get(wid)))
        for wid, w in sorted(latest.items(), key=lambda item: (item[1].role, item[0]))
    ]
    # refresh the acked workers' rows with their latest beat (problems may have changed)
    acks = [dataclasses.replace(a, worker=latest.get(a.worker.id, a.worker)) for a in acks]
    return AckReport(version=version, acks=acks, waited_ms=(time.perf_counter() - start) * 1000)


def refusal_of(worker: WorkerInfo, version: str) -> str | None:
    """Why ``worker`` refused ``version`` (its beat's ``refused`` record); None: it did not."""
    record = worker.extra.get("refused")
    if isinstance(record, dict) and record.get("version") == version:
        return str(record.get("reason") or "refused")
    return None
