"""A fan-out pack's progress log: each event's outcome durable before the next event runs.

What a pack job holds in memory dies with its RQ worker: a SIGKILL between two events used
to lose the failed events waiting to be dead-lettered at the end, the decision-log records
waiting to be written in one batch, and, once RQ gave up rerunning the pack, every event
after the kill. So each pack keeps a hash on the RQ Redis (:func:`~hookbus.bus.keys.pack_log`),
written after every event and read when the pack starts:

- ``done``: how many of the pack's events have an outcome, in order; a rerun starts there;
- ``r:<i>``: event ``i``'s decision-log record, kept until the pack writes its records in
  one batch entry at its end (a killed run's records go with the rerun's);
- ``k:<i>``: runs of the pack that stopped (their worker died) with event ``i`` next. At
  :data:`POISON_KILLS` the event is poison: dead-lettered by its own id, the pack goes on;
- ``starts``: how many times the pack started; ``flushed``: its records went to the
  decision log, so a pack run again after its end does nothing.

An outcome is written in one MULTI/EXEC with what follows from it (a failed event's retry
job or dead letter): both happen or neither. Cost: a round trip per event (benchmarks/
fanout.py). Still at least once: the event running when the worker died, and the pack's
records if it dies between writing them to the decision log and marking them written.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis

from hookbus.bus.connection import CONNECTION_ERRORS
from hookbus.errors import PackProgressLost

log = logging.getLogger(__name__)

#: Runs of a pack its worker died in, with the same event next, before that event is
#: dead-lettered as the pack's poison (a single job is run this many times too).
POISON_KILLS = 3
#: How long a pack's progress log outlives its last start, in seconds (a pack RQ gave up
#: on waits in the dead letters; requeued within this, it still resumes).
PACK_LOG_TTL_S = 7 * 24 * 3600
#: How long a finished pack's "flushed" mark stays, in seconds: longer than RQ takes to
#: notice a worker that died as the pack returned and run it again.
FLUSHED_TTL_S = 3600
#: How long an outcome is retried while the RQ Redis is away or refuses writes, in s.
WRITE_FOR_S = 30.0

_ERRORS: tuple[type[BaseException], ...] = (*CONNECTION_ERRORS, redis.exceptions.RedisError)

#: Adds the commands that go with an outcome (a retry's enqueue, a dead letter) to a MULTI.
Also = Callable[[Any], None]


@dataclass
class PackState:
    """What a starting pack finds in its log."""

    starts: int = 1
    done: int = 0
    records: dict[int, bytes] = field(default_factory=dict)
    flushed: bool = False
    #: Runs that stopped with event ``done`` next, this start included (0 on a first one).
    kills: int = 0

    @property
    def resumed(self) -> bool:
        return self.starts > 1


class PackLog:
    """The progress log of one pack job on ``conn`` (the RQ Redis)."""

    def __init__(self, conn: redis.Redis, key: str, pack: str) -> None:
        self.conn = conn
        self.key = key
        self.pack = pack

    def open(self, events: int) -> PackState:
        """Count this start and read the log; on a rerun with events left, count a death
        against the event that was next (raises :class:`PackProgressLost` when Redis
        cannot be read: running blind would run finished events again)."""
        try:
            with self.conn.pipeline(transaction=True) as pipe:
                pipe.hincrby(self.key, "starts", 1)
                pipe.hgetall(self.key)
                pipe.expire(self.key, PACK_LOG_TTL_S)
                starts, raw, _ = pipe.execute()
            state = _parse(int(starts), raw)
            if state.resumed and not state.flushed and state.done < events:
                state.kills = int(self.conn.hincrby(self.key, f"k:{state.done}", 1))
        except _ERRORS as exc:
            raise PackProgressLost(self.pack, 0, str(exc)) from exc
        return state

    def outcome(self, index: int, record: bytes, also: Also | None = None) -> None:
        """Make event ``index``'s outcome durable (with ``also``'s commands, atomically),
        retrying with backoff for up to :data:`WRITE_FOR_S`; a retry after an unanswered
        try first checks whether that try got through, so nothing is enqueued twice."""
        end = time.monotonic() + WRITE_FOR_S
        delay = 0.05
        tried = False
        while True:
            try:
                if tried and int(self.conn.hget(self.key, "done") or 0) > index:
                    return
                tried = True
                with self.conn.pipeline(transaction=True) as pipe:
                    if also is not None:
                        also(pipe)
                    pipe.hset(self.key, mapping={"done": index + 1, f"r:{index}": record})
                    pipe.execute()
                return
            except _ERRORS as exc:
                if time.monotonic() + delay > end:
                    raise PackProgressLost(self.pack, index, str(exc)) from exc
                log.warning(
                    "pack %s: outcome of event %d not written yet (%s)", self.pack, index, exc
                )
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def flushed(self, events: int) -> None:
        """The records are in the decision log: keep only the mark that says so (a
        failure is logged: a rerun would write the records once more, nothing is lost)."""
        try:
            with self.conn.pipeline(transaction=True) as pipe:
                pipe.delete(self.key)
                pipe.hset(self.key, mapping={"flushed": 1, "done": events})
                pipe.expire(self.key, FLUSHED_TTL_S)
                pipe.execute()
        except _ERRORS as exc:
            log.warning("pack %s: end not recorded (%s)", self.pack, exc)


def _parse(starts: int, raw: dict[Any, Any]) -> PackState:
    state = PackState(starts=starts)
    for name, value in raw.items():
        text = name.decode() if isinstance(name, bytes) else str(name)
        if text == "done":
            state.done = int(value)
        elif text == "flushed":
            state.flushed = True
        elif text.startswith("r:"):
            state.records[int(text[2:])] = bytes(value)
    return state
