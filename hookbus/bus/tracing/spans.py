"""OpenTelemetry spans on the worker side, built after the fact from a decision's trace.

:func:`record_chain` turns one answered request into a ``hookbus.chain`` span (a child of
the producer's span, whose context the event carries) with one child span per hook run,
built afterwards from the decision's trace with the runs' own start and end times, so the
chain's hot path does no tracing work at all; :func:`record_job` does the same for a fan-out
job's hook run. The producer's side is :mod:`hookbus.bus.tracing.producer`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from hookbus.bus.tracing.context import (
    TRACER_NAME,
    active_trace,
    event_attributes,
    parent_context,
    set_decided,
)

if TYPE_CHECKING:
    from hookbus.bus.wire import Decision, Event


def _hook_span(
    trace: Any,
    tracer: Any,
    parent: Any,
    *,
    hook: str,
    outcome: str,
    start_ns: int,
    end_ns: int,
    error: str | None,
    attributes: dict[str, Any],
) -> None:
    span = tracer.start_span(
        f"hookbus.hook {hook}",
        context=parent,
        start_time=start_ns,
        attributes={**attributes, "hookbus.hook": hook, "hookbus.hook_outcome": outcome},
    )
    if outcome in ("error", "timeout"):
        span.set_status(trace.Status(trace.StatusCode.ERROR, error or outcome))
    span.end(end_time=end_ns)


def record_chain(
    event: Event, decision: Decision, *, end_ns: int, duration_ns: int, worker: str | None
) -> None:
    """The spans of one answered request: ``hookbus.chain <kind>`` (a child of the
    producer's span when the event carries its context) from ``end_ns - duration_ns`` to
    ``end_ns`` (epoch ns), and one ``hookbus.hook <id>`` child per hook run in its trace and
    shadow runs, laid end to end from the chain's start as the chain ran them."""
    trace = active_trace()
    if trace is None:
        return
    tracer = trace.get_tracer(TRACER_NAME)
    start_ns = end_ns - duration_ns
    attributes = event_attributes(event)
    if worker:
        attributes["hookbus.worker"] = worker
    chain = tracer.start_span(
        f"hookbus.chain {event.kind}",
        context=parent_context(trace, event.meta),
        kind=trace.SpanKind.SERVER,
        start_time=start_ns,
        attributes=attributes,
    )
    set_decided(chain, decision)
    parent = trace.set_span_in_context(chain)
    mark = start_ns
    for run in decision.trace:
        if run.outcome == "skipped":
            continue
        took = run.duration_us * 1000
        _hook_span(
            trace,
            tracer,
            parent,
            hook=run.hook_id,
            outcome=run.outcome,
            start_ns=mark,
            end_ns=mark + took,
            error=run.error,
            attributes={},
        )
        mark += took
    for shadow in decision.shadow:
        if shadow.outcome == "skipped":
            continue
        took = shadow.duration_us * 1000
        _hook_span(
            trace,
            tracer,
            parent,
            hook=shadow.hook,
            outcome=shadow.outcome,
            start_ns=mark,
            end_ns=mark + took,
            error=shadow.reason,
            attributes={"hookbus.shadow": True},
        )
        mark += took
    chain.end(end_time=max(end_ns, mark))


def record_job(
    hook: str,
    events: Iterable[Event],
    *,
    outcome: str,
    end_ns: int,
    duration_ns: int,
    error: str | None,
    worker: str | None,
) -> None:
    """The span of one fan-out job's hook run, a child of the publisher's span when the
    (first) event carries its context."""
    trace = active_trace()
    if trace is None:
        return
    first = next(iter(events), None)
    attributes = event_attributes(first) if first is not None else {}
    if worker:
        attributes["hookbus.worker"] = worker
    _hook_span(
        trace,
        trace.get_tracer(TRACER_NAME),
        parent_context(trace, first.meta) if first is not None else None,
        hook=hook,
        outcome=outcome,
        start_ns=end_ns - duration_ns,
        end_ns=end_ns,
        error=error,
        attributes=attributes,
    )
