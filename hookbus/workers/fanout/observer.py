"""Request observers: every answered request reaches its non-blocking hooks, off the
critical path, exactly once, whatever the chain decided.

A blocking request runs only the chain (its blocking hooks, and ``inline`` advisory ones).
The hooks that merely *observe* it (``blocking = false``: audit, alerting, telemetry) run as
RQ jobs, like a published event's hooks, with retries and dead letters, and see the
decision. They are fed from the decision log, which the chain worker writes in bulk after
its answers are out (:mod:`hookbus.workers.chain.ledger`), so the answer path gains no Redis
command and no latency:

1. a :class:`RequestObserver` per partition reads the partition's decision log in the
   consumer group ``observe`` (fan-out jobs' ``hook_run`` entries are skipped);
2. for each answer of a kind some observer watches it fetches the request from the
   request stream (``XRANGE`` by the entry id the record holds) and adds the decision to
   the event's ``meta["decision"]`` (``outcome``, ``reason``, ``hook``: the deciding hook,
   ``degraded``, ``worker``, ``request_id``);
3. ``observe_forward.lua`` acknowledges the decision-log entry and appends those events to
   the partition's event log in one step, only when its XACK won: a reclaimed entry is
   forwarded once. ``hookbus tail`` and replays of the event log then show the request;
4. the fan-out dispatcher sends such an event to the observers only
   (:func:`~hookbus.workers.fanout.job_specs.observes_requests`): the chain's hooks have
   already run on it.

The chain worker logs the answers of every observed kind whatever ``streams.decision_log``
says. What observers never see: a request that no worker answered (expired before a worker
read it, no worker alive, dead-lettered as poison), since no chain decided it; a request
the request stream trimmed before its observer read the log (logged as a warning); and the
answers of decision-log entries trimmed (``streams.decisions_maxlen``) before the observers
read them: ``observe_read.lua`` counts those in ``<decisions>:lost`` as it reads, which
``hookbus status``, the metrics and the console show, and each is logged as an error.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import msgspec
import redis
import redis.exceptions

from hookbus.bus import ids
from hookbus.bus.decision_batch import expand
from hookbus.bus.keys import OBSERVE_GROUP, Keys, trimmed_undelivered
from hookbus.bus.reqrep import REQUEST_FIELD
from hookbus.bus.wire import Decision, Event, decode, encode, now_ms
from hookbus.errors import WireError
from hookbus.workers.fanout.gate import HookSetGate
from hookbus.workers.fanout.job_specs import OBSERVED_META, script_source
from hookbus.workers.fleet.backoff import Backoff

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings

log = logging.getLogger(__name__)

#: Decision-log entries read per XREADGROUP (a batch entry holds up to 512 answers).
DEFAULT_READ_COUNT = 20
#: Longest a read blocks, in ms (the loop checks its stop event between reads).
READ_BLOCK_MS = 1_000
#: A pending entry idle this long belongs to a dead (or stuck) observer, in ms.
DEFAULT_CLAIM_MIN_IDLE_MS = 5_000
#: How often pending entries of other observers are looked for, in ms.
RECLAIM_INTERVAL_MS = 2_000
#: Entries reclaimed per XAUTOCLAIM call.
RECLAIM_COUNT = 20
#: Field of a fan-out job's decision-log entry (``hook_run``): not an answer.
_RUN_TYPE_FIELD = b"type"
#: Trace outcomes of a hook that did not decide.
_NOT_DECIDING = frozenset({"continue", "skipped", "allow"})

_REDIS_ERRORS = (redis.exceptions.RedisError, ConnectionError, OSError)


def _fields(raw: Any) -> dict[bytes, bytes]:
    """An entry's fields as a dict (a script's reply gives the flat list of RESP2)."""
    if isinstance(raw, dict):
        return raw
    return dict(zip(raw[::2], raw[1::2], strict=True))


class _Observes(Protocol):
    def observes(self, kind: str) -> bool: ...


def decision_summary(decision: Decision, record: dict[bytes, bytes]) -> dict[str, Any]:
    """What an observer hook sees of the answer, in ``meta["decision"]``."""
    hook = None
    if decision.outcome != "allow" or decision.updated:
        deciding = [run for run in decision.trace if run.outcome not in _NOT_DECIDING]
        hook = deciding[-1].hook_id if deciding else None
    return {
        "outcome": decision.outcome,
        "reason": decision.reason,
        "hook": hook,
        "degraded": decision.degraded,
        "worker": decision.worker or record.get(b"worker", b"").decode(errors="replace"),
        "request_id": record.get(b"id", b"").decode(errors="replace"),
    }


def observed_event(data: bytes, decision: Decision, record: dict[bytes, bytes]) -> bytes:
    """The request as an event of the event log: its decision in ``meta``, no reply key or
    deadline (nothing waits for it any more)."""
    event = decode(data, Event)
    meta = dict(event.meta)
    meta[OBSERVED_META] = decision_summary(decision, record)
    return encode(
        msgspec.structs.replace(event, meta=meta, reply_to=None, deadline=None, budget_ms=None)
    )


class RequestObserver:
    """One partition's reader of the decision log in the group ``observe``.

    ``stream`` is the client of the partition's slot (its request, decision and event
    streams); ``registry`` answers :meth:`observes` (a HookRegistry following reloads)."""

    def __init__(
        self,
        settings: Settings,
        registry: _Observes,
        *,
        stream: redis.Redis,
        partition: int = 0,
        consumer: str | None = None,
        read_count: int = DEFAULT_READ_COUNT,
        claim_min_idle_ms: int = DEFAULT_CLAIM_MIN_IDLE_MS,
    ) -> None:
        self.settings = settings
        self.registry = registry
        self.stream = stream
        self.partition = partition
        self.keys = Keys.for_partition(settings.namespace, partition)
        self.consumer = consumer or f"{socket.gethostname()}-{os.getpid()}-{ids.token(6)}"
        self.read_count = read_count
        self.claim_min_idle_ms = claim_min_idle_ms
        self._forward = stream.register_script(script_source("observe_forward.lua"))
        self._read_script = stream.register_script(script_source("observe_read.lua"))
        self._last_reclaim_ms = 0
        #: requests forwarded to the event log, and those whose request was gone
        self.forwarded = 0
        self.missed = 0
        #: decision-log entries trimmed before this observer handled them
        self.lost = 0
        #: set by the role: :meth:`run` reads nothing while no hook set is loaded
        self.gate: HookSetGate | None = None

    def ensure_group(self) -> None:
        """Create the ``observe`` group (from the start of the log) unless it exists."""
        try:
            self.stream.xgroup_create(self.keys.decisions, OBSERVE_GROUP, id="0", mkstream=True)
        except redis.exceptions.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def step(self, block_ms: int | None = None) -> int:
        """Reclaim when due, read new decision-log entries (blocking up to ``block_ms``)
        and forward their observed requests. Returns how many entries were handled."""
        handled = 0
        now = now_ms()
        if now - self._last_reclaim_ms >= RECLAIM_INTERVAL_MS:
            self._last_reclaim_ms = now
            handled += self.reclaim()
        entries, last = self._read()
        # wait for a newer entry without reading it: a group read that blocks could, once
        # woken, read past entries trimmed meanwhile and hide that they were lost
        waited = not entries and block_ms and block_ms > 0
        if waited and self.stream.xread({self.keys.decisions: last}, count=1, block=block_ms):
            entries, _ = self._read()
        if entries:
            handled += self.handle(entries)
        return handled

    def _read(self) -> tuple[list[tuple[bytes, dict[bytes, bytes]]], bytes]:
        """New decision-log entries (at most ``read_count``) and the log's last id, the
        entries its trim took before this group read them counted first."""
        reply: Any = self._read_script(
            keys=[self.keys.decisions, trimmed_undelivered(self.keys.decisions)],
            args=[OBSERVE_GROUP, self.consumer, self.read_count],
        )
        read, last, lost = reply
        if lost:
            self._lost(int(lost), "before they were read")
        entries = read[0][1] if read else []
        return [(eid, _fields(raw)) for eid, raw in entries], last

    def _lost(self, count: int, when: str) -> None:
        self.lost += count
        log.error(
            "request observer: %d entries of %s were trimmed %s, their requests' observers "
            "never ran (counted in %s); raise streams.decisions_maxlen",
            count,
            self.keys.decisions,
            when,
            trimmed_undelivered(self.keys.decisions),
        )

    def run(self, stop: threading.Event) -> None:
        """Loop until ``stop`` is set; Redis outages are logged and retried with backoff."""
        self.ensure_group()
        backoff = Backoff()
        while not stop.is_set():
            if self.gate is not None and self.gate.hold(stop):
                continue
            try:
                self.step(READ_BLOCK_MS)
                backoff.reset()
            except _REDIS_ERRORS as exc:
                delay = backoff.next_s()
                log.warning("request observer: Redis error, retrying in %.2fs: %s", delay, exc)
                stop.wait(delay)
                with contextlib.suppress(*_REDIS_ERRORS):
                    self.ensure_group()
            except Exception:
                # the entries stay pending and are reclaimed: keep serving
                delay = backoff.next_s()
                log.exception("request observer: step failed, retrying in %.2fs", delay)
                stop.wait(delay)

    def reclaim(self) -> int:
        """Take over entries another observer left pending for ``claim_min_idle_ms``."""
        reply: Any = self.stream.xautoclaim(
            self.keys.decisions,
            OBSERVE_GROUP,
            self.consumer,
            min_idle_time=self.claim_min_idle_ms,
            start_id="0-0",
            count=RECLAIM_COUNT,
        )
        entries = [(eid, fields) for eid, fields in reply[1] if fields is not None]
        gone = len(reply[2]) if len(reply) > 2 else 0
        if gone:  # read by an observer that died, then trimmed before anyone handled them
            self.stream.incrby(trimmed_undelivered(self.keys.decisions), gone)
            self._lost(gone, "while pending")
        return self.handle(entries) if entries else 0

    def handle(self, entries: Sequence[tuple[bytes, dict[bytes, bytes]]]) -> int:
        """Forward the observed requests of ``entries`` and acknowledge them (one script
        call, which forwards only what its XACK won). Returns len(entries)."""
        plan: list[tuple[bytes, list[bytes]]] = []
        wanted: list[tuple[int, dict[bytes, bytes]]] = []
        for entry_id, fields in entries:
            plan.append((entry_id, []))
            if _RUN_TYPE_FIELD in fields:
                continue  # a fan-out job's record of a hook run, not an answer
            for record in expand(fields):
                if _RUN_TYPE_FIELD in record:
                    continue  # a pack's record of a hook run (a batch entry), not an answer
                kind = record.get(b"kind", b"").decode(errors="replace")
                if record.get(b"entry") and record.get(b"d") and self.registry.observes(kind):
                    wanted.append((len(plan) - 1, record))
        if wanted:
            for (index, record), data in zip(wanted, self._requests(wanted), strict=True):
                forwarded = self._event(record, data)
                if forwarded is not None:
                    plan[index][1].append(forwarded)
        args: list[Any] = [OBSERVE_GROUP, self.settings.streams.events_maxlen, len(plan)]
        for entry_id, events in plan:
            args += [entry_id, len(events), *events]
        started = time.perf_counter()
        added = int(self._forward(keys=[self.keys.decisions, self.keys.events], args=args))
        self.forwarded += added
        log.debug(
            "request observer: %d request(s) forwarded in %.1f ms",
            added,
            (time.perf_counter() - started) * 1000,
        )
        return len(entries)

    def _requests(self, wanted: list[tuple[int, dict[bytes, bytes]]]) -> list[bytes | None]:
        """The request of each wanted answer, from the request stream (None when gone)."""
        with self.stream.pipeline(transaction=False) as pipe:
            for _, record in wanted:
                entry = record[b"entry"]
                pipe.xrange(self.keys.requests, entry, entry, count=1)
            rows: list[Any] = pipe.execute()
        return [row[0][1].get(REQUEST_FIELD) if row else None for row in rows]

    def _event(self, record: dict[bytes, bytes], data: bytes | None) -> bytes | None:
        entry = record[b"entry"].decode(errors="replace")
        if data is None:
            self.missed += 1
            log.warning(
                "request observer: request %s (entry %s of %s) was trimmed before its "
                "observers saw it; raise streams.requests_maxlen",
                record.get(b"id", b"?").decode(errors="replace"),
                entry,
                self.keys.requests,
            )
            return None
        try:
            return observed_event(data, decode(record[b"d"], Decision), record)
        except (WireError, msgspec.MsgspecError, ValueError) as exc:
            self.missed += 1
            log.warning("request observer: entry %s not forwarded: %s", entry, exc)
            return None
