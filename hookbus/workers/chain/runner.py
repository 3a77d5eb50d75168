"""Running one request: decode it, judge its deadline, run the chain, build the answer.

The deadline is the request's ``budget_ms`` after the Redis time of its stream entry,
judged by Redis server time (:mod:`~hookbus.workers.chain.clock`), never by a host's
clock. A request whose deadline has passed is dropped (acknowledged and counted): its
producer already applied its policy. The chain gets the time left minus a margin for the
reply's trip, so a hook timing out still has its ``on_error`` answer arrive in time.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import TYPE_CHECKING

from hookbus.bus import reqrep
from hookbus.bus.policy.timeout import policy_decision
from hookbus.bus.tracing.spans import record_chain
from hookbus.bus.wire import Decision, Event
from hookbus.errors import WireError
from hookbus.workers.chain.clock import request_budget_ms, time_left_ms
from hookbus.workers.chain.replier import Ack, Dead, Op, Replier
from hookbus.workers.entry_decoding import decode_event, payload_problem
from hookbus.workers.fleet import hook_run_log
from hookbus.workers.fleet.metrics import NO_METRICS, MetricsSink
from hookbus.workers.reload.health import HookSetVerdict

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings
    from hookbus.hooks.registry import HookRegistry
    from hookbus.workers.chain.parking import Parking
    from hookbus.workers.fleet.heartbeat import Heartbeat

log = logging.getLogger(__name__)

#: Part of a request's time left kept back for the reply's trip to the producer: the chain
#: gets the rest, so a hook timing out still has its ``on_error`` answer arrive in time.
REPLY_MARGIN_FRACTION = 0.05
#: Bounds of that margin, in ms.
REPLY_MARGIN_MIN_MS = 3.0
REPLY_MARGIN_MAX_MS = 50.0


def event_request_id(event: Event) -> str:
    """The id a reply must carry: the call's ``request_id``, or the event id from producers
    that predate request ids."""
    request_id: str | None = getattr(event, "request_id", None)
    return request_id or event.id


def chain_budget_s(left_ms: float | None) -> float | None:
    """The chain's share of the time left: all of it but the reply margin."""
    if left_ms is None:
        return None
    margin = min(max(left_ms * REPLY_MARGIN_FRACTION, REPLY_MARGIN_MIN_MS), REPLY_MARGIN_MAX_MS)
    return max(left_ms - margin, left_ms / 2) / 1000


class ChainRunner:
    """Turns one request entry into the op that answers it (reply, ack or dead letter)."""

    def __init__(
        self,
        settings: Settings,
        registry: HookRegistry,
        *,
        clock: reqrep.ServerClock,
        replier: Replier,
        heartbeat: Heartbeat,
        worker_id: str,
    ) -> None:
        self.settings = settings
        self.registry = registry
        self.clock = clock
        self.replier = replier
        self.heartbeat = heartbeat
        self.worker_id = worker_id
        #: recent chain durations in ms (the reader reads one at a time when chains are slow)
        self.durations: deque[float] = deque(maxlen=256)
        self.expired = 0
        #: what this worker's hook set lacks, and which requests it therefore answers by
        #: policy (flagged degraded) instead of by a partial chain
        self.hook_set = HookSetVerdict()
        #: what answered requests are counted in (``--metrics-port``; else records nothing)
        self.metrics: MetricsSink = NO_METRICS
        #: parks an ``ask`` that routes to an operator (None: every ask goes to the agent)
        self.parking: Parking | None = None

    def process(self, entry_id: bytes, fields: dict[bytes, bytes], deliveries: int = 1) -> Op:
        """Run the chain for one entry and return how to answer it.

        Nothing one entry does escapes this call: whatever goes wrong that the steps below
        do not handle dead-letters this entry alone, never the read it came in.
        """
        try:
            return self._process(entry_id, fields, deliveries)
        except Exception as exc:
            log.exception("request entry %s could not be handled; dead-lettered", entry_id)
            return Dead(entry_id, fields, deliveries, f"worker failed: {type(exc).__name__}: {exc}")

    def _process(self, entry_id: bytes, fields: dict[bytes, bytes], deliveries: int) -> Op:
        try:
            raw = fields.get(reqrep.REQUEST_FIELD)
            if raw is None:
                raise WireError("request entry has no 'e' field", field="$")
            event = decode_event(raw, max_bytes=self.settings.streams.max_event_bytes)
        except WireError as exc:
            log.error("request %s is not a valid event (%s); dead-lettered", entry_id, exc)
            self.heartbeat.count("poison")
            return Dead(entry_id, fields, deliveries, f"undecodable: {exc}")
        left_ms = time_left_ms(self.clock, entry_id, event)
        if left_ms is not None and left_ms <= 0:
            self.expired += 1
            self.heartbeat.count("expired")
            self.metrics.request_expired()
            log.debug("request %s expired %.1f ms ago; dropped", event.id, -left_ms)
            return Ack(entry_id)
        problem = payload_problem(event)
        if problem is not None:
            log.error("request %s refused: %s; answered by policy", event.id, problem)
            self.heartbeat.count("poison")
            refused = self.chain_failed(event, WireError(f"request refused: {problem}"))
            refused.worker = self.worker_id
            self.observe(event, refused, None, "refused")
            return self.replier.reply_op(entry_id, event, refused, 0.0)
        gap = self.hook_set.gap(event.kind)
        if gap is not None:
            outcome, detail = gap
            self.heartbeat.count("incomplete_set")
            decision = policy_decision(
                "chain_error",
                outcome or self.settings.on_timeout_for(event.kind),
                deadline_ms=request_budget_ms(event),
                request_id=event_request_id(event),
                detail=detail,
            )
            decision.worker = self.worker_id
            self.observe(event, decision, None, "incomplete_set")
            return self.replier.reply_op(entry_id, event, decision, 0.0)
        started = time.perf_counter()
        error = False
        try:
            decision = self.registry.run(event, time_left_s=chain_budget_s(left_ms))
        except Exception as exc:  # the registry isolates hooks; this is a bug, not a hook
            log.exception("chain for request %s failed", event.id)
            error = True
            decision = self.chain_failed(event, exc)
        duration_ms = (time.perf_counter() - started) * 1000
        self.durations.append(duration_ms)
        for run in decision.trace:
            if run.outcome in ("error", "timeout"):
                error = True
                self.heartbeat.count_hook(run.hook_id, run.outcome)
        self.heartbeat.record(duration_ms, error)
        decision.worker = self.worker_id
        decision.request_id = event_request_id(event)
        self.observe(event, decision, duration_ms, "chain_error")
        try:
            if decision.outcome == "ask" and self.parking is not None:
                park = self.parking.op(entry_id, event, decision, duration_ms)
                if park is not None:
                    return park
            return self.replier.reply_op(entry_id, event, decision, duration_ms)
        except Exception as exc:  # e.g. a hook put something unencodable in `updated`
            log.exception("decision for request %s cannot be encoded", event.id)
            failed = self.chain_failed(event, exc)
            failed.worker = self.worker_id
            return self.replier.reply_op(entry_id, event, failed, duration_ms)

    def abandoned(self, entry_id: bytes, fields: dict[bytes, bytes], deliveries: int) -> list[Op]:
        """A request whose workers kept dying while running it: not run again. Answered by
        its kind's policy (flagged degraded) when it decodes, and dead-lettered."""
        dead = Dead(entry_id, fields, deliveries, "too many deliveries")
        try:
            raw = fields.get(reqrep.REQUEST_FIELD)
            if raw is None:
                return [dead]
            event = decode_event(raw, max_bytes=self.settings.streams.max_event_bytes)
            crashed = RuntimeError(f"its worker died running it {deliveries - 1} time(s)")
            decision = self.chain_failed(event, crashed)
            decision.worker = self.worker_id
            self.observe(event, decision, None, "abandoned")
            # the reply first: its XACK wins and it is answered; the dead letter's XACK is
            # then a no-op
            return [self.replier.reply_op(entry_id, event, decision, 0.0, guarded=True), dead]
        except Exception:
            log.exception("request entry %s cannot be answered by policy", entry_id)
            return [dead]

    def observe(
        self, event: Event, decision: Decision, duration_ms: float | None, reason: str
    ) -> None:
        """An answered request's metrics, one log line per hook run and its spans, all from
        the finished decision (each a no-op unless switched on: ``--metrics-port``, INFO
        logging, OpenTelemetry); ``reason`` labels it when a policy answered, and
        ``duration_ms`` is None when no chain ran."""
        self.metrics.decision_made(
            decision,
            None if duration_ms is None else duration_ms / 1000,
            reason if decision.degraded else None,
        )
        version = decision.bundle_version or self.registry.version
        hook_run_log.log_decision_runs(
            event, decision, worker=self.worker_id, bundle_version=version
        )
        record_chain(
            event,
            decision,
            end_ns=time.time_ns(),
            duration_ns=int((duration_ms or 0.0) * 1e6),
            worker=self.worker_id,
        )

    def chain_failed(self, event: Event, exc: Exception) -> Decision:
        """The kind's policy answer, flagged degraded, naming what failed."""
        return self.policy_answer(event, f"{type(exc).__name__}: {exc}")

    def policy_answer(self, event: Event, detail: str) -> Decision:
        """The kind's policy answer, flagged degraded, with ``detail`` in its reason."""
        return policy_decision(
            "chain_error",
            self.settings.on_timeout_for(event.kind),
            deadline_ms=request_budget_ms(event),
            request_id=event_request_id(event),
            detail=detail,
        )
