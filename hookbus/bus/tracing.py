"""OpenTelemetry spans for requests and hook runs, the trace context carried in the event.

Producer side: :func:`traced_request` (and :func:`traced_arequest` for ``async def``,
:func:`traced_publish` / :func:`traced_apublish` for events) wraps a client method in a
span and writes the W3C trace context (``traceparent``, ``tracestate``) of that span into
the event's ``meta``, so whoever handles the event continues the same trace. Worker side:
:func:`record_chain` turns one answered request into a ``hookbus.chain`` span (a child of
the producer's span) with one child span per hook run, built afterwards from the decision's
trace with the runs' own start and end times, so the chain's hot path does no tracing work
at all; :func:`record_job` does the same for a fan-out job's hook run.

When is it on? When this process has loaded ``opentelemetry.trace`` and set a tracer
provider (``trace.set_tracer_provider``, or ``OTEL_PYTHON_TRACER_PROVIDER``; noticed within
a second): an
application that set up OpenTelemetry has, and so has a worker run under
``opentelemetry-instrument``. Otherwise (OpenTelemetry not installed, or installed and not
set up) every entry point costs a ``sys.modules`` lookup (and, when the API is loaded, one
provider check) and hookbus imports nothing of it: the producer path keeps its start-up
budget, and spans no SDK would record are never built. The optional extra
``hookbus[otel]`` installs the API.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import msgspec

if TYPE_CHECKING:
    from hookbus.bus.wire import Decision, Event

#: The instrumentation scope name spans are created under.
TRACER_NAME = "hookbus"
#: The ``meta`` keys the W3C trace context travels in.
CONTEXT_KEYS = ("traceparent", "tracestate")
_TRACE_MODULE = "opentelemetry.trace"

#: A decorated client method: its signature is kept as it is, for callers and type checks.
_F = TypeVar("_F", bound=Callable[..., Any])


#: How long the answer "is a tracer provider set?" is reused, in seconds: asking the API
#: costs microseconds, and this is asked on every request.
RECHECK_S = 1.0
#: (monotonic time until which the answer holds, the answer).
_answer: tuple[float, Any] = (0.0, None)


def _trace() -> Any:
    """``opentelemetry.trace`` when this process has loaded it and set a tracer provider,
    else None. Never imports it: a loaded module without a provider (redis-py 8 loads the
    API whenever the SDK is installed) would only make spans nobody records. A provider set
    later is noticed within :data:`RECHECK_S`."""
    global _answer
    trace = sys.modules.get(_TRACE_MODULE)
    if trace is None:
        return None
    now = time.monotonic()
    until, answer = _answer
    if now < until:
        return answer
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        answer = None
    else:
        answer = trace
    _answer = (now + RECHECK_S, answer)
    return answer


def recheck() -> None:
    """Forget whether a tracer provider is set (tests that set or unset one call this)."""
    global _answer
    _answer = (0.0, None)


def enabled() -> bool:
    """True when spans are made here (see the module docstring)."""
    return _trace() is not None


def _propagator() -> Any:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator()


def with_context(event: Event) -> Event:
    """``event`` with the current span's trace context in its ``meta`` (a copy; the
    caller's event and meta are untouched); ``event`` itself when there is none."""
    carrier: dict[str, str] = {}
    _propagator().inject(carrier)
    if not carrier:
        return event
    return msgspec.structs.replace(event, meta={**event.meta, **carrier})


def _parent(trace: Any, meta: dict[str, Any]) -> Any:
    """The context a worker's span continues: the producer's, read from ``meta``."""
    carrier = {k: meta[k] for k in CONTEXT_KEYS if isinstance(meta.get(k), str)}
    return _propagator().extract(carrier) if carrier else None


def _event_attributes(event: Event) -> dict[str, Any]:
    attributes: dict[str, Any] = {"hookbus.kind": event.kind, "hookbus.event_id": event.id}
    if event.agent_id:
        attributes["hookbus.agent_id"] = event.agent_id
    if event.session_id:
        attributes["hookbus.session_id"] = event.session_id
    return attributes


def _decided(span: Any, decision: Decision) -> None:
    span.set_attribute("hookbus.outcome", decision.outcome)
    span.set_attribute("hookbus.degraded", decision.degraded)
    if decision.request_id:
        span.set_attribute("hookbus.request_id", decision.request_id)


# --- producer side --------------------------------------------------------------------


def traced_request(fn: _F) -> _F:
    """Decorate a client's ``request(self, event, ...)``: a CLIENT span around the call,
    its context sent in ``event.meta``."""

    @functools.wraps(fn)
    def request(self: Any, event: Event, *args: Any, **kwargs: Any) -> Any:
        trace = _trace()
        if trace is None:
            return fn(self, event, *args, **kwargs)
        tracer = trace.get_tracer(TRACER_NAME)
        with tracer.start_as_current_span(
            f"hookbus.request {event.kind}",
            kind=trace.SpanKind.CLIENT,
            attributes=_event_attributes(event),
        ) as span:
            decision = fn(self, with_context(event), *args, **kwargs)
            _decided(span, decision)
            return decision

    return cast("_F", request)


def traced_arequest(fn: _F) -> _F:
    """:func:`traced_request` for an ``async def request``."""

    @functools.wraps(fn)
    async def request(self: Any, event: Event, *args: Any, **kwargs: Any) -> Any:
        trace = _trace()
        if trace is None:
            return await fn(self, event, *args, **kwargs)
        tracer = trace.get_tracer(TRACER_NAME)
        with tracer.start_as_current_span(
            f"hookbus.request {event.kind}",
            kind=trace.SpanKind.CLIENT,
            attributes=_event_attributes(event),
        ) as span:
            decision = await fn(self, with_context(event), *args, **kwargs)
            _decided(span, decision)
            return decision

    return cast("_F", request)


def traced_publish(fn: _F) -> _F:
    """Decorate a client's ``publish(self, event)``: a PRODUCER span, its context sent in
    ``event.meta`` so the fan-out jobs' hook runs join the trace."""

    @functools.wraps(fn)
    def publish(self: Any, event: Event, *args: Any, **kwargs: Any) -> Any:
        trace = _trace()
        if trace is None:
            return fn(self, event, *args, **kwargs)
        tracer = trace.get_tracer(TRACER_NAME)
        with tracer.start_as_current_span(
            f"hookbus.publish {event.kind}",
            kind=trace.SpanKind.PRODUCER,
            attributes=_event_attributes(event),
        ):
            return fn(self, with_context(event), *args, **kwargs)

    return cast("_F", publish)


def traced_apublish(fn: _F) -> _F:
    """:func:`traced_publish` for an ``async def publish``."""

    @functools.wraps(fn)
    async def publish(self: Any, event: Event, *args: Any, **kwargs: Any) -> Any:
        trace = _trace()
        if trace is None:
            return await fn(self, event, *args, **kwargs)
        tracer = trace.get_tracer(TRACER_NAME)
        with tracer.start_as_current_span(
            f"hookbus.publish {event.kind}",
            kind=trace.SpanKind.PRODUCER,
            attributes=_event_attributes(event),
        ):
            return await fn(self, with_context(event), *args, **kwargs)

    return cast("_F", publish)


# --- worker side ----------------------------------------------------------------------


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
    trace = _trace()
    if trace is None:
        return
    tracer = trace.get_tracer(TRACER_NAME)
    start_ns = end_ns - duration_ns
    attributes = _event_attributes(event)
    if worker:
        attributes["hookbus.worker"] = worker
    chain = tracer.start_span(
        f"hookbus.chain {event.kind}",
        context=_parent(trace, event.meta),
        kind=trace.SpanKind.SERVER,
        start_time=start_ns,
        attributes=attributes,
    )
    _decided(chain, decision)
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
    trace = _trace()
    if trace is None:
        return
    first = next(iter(events), None)
    attributes = _event_attributes(first) if first is not None else {}
    if worker:
        attributes["hookbus.worker"] = worker
    _hook_span(
        trace,
        trace.get_tracer(TRACER_NAME),
        _parent(trace, first.meta) if first is not None else None,
        hook=hook,
        outcome=outcome,
        start_ns=end_ns - duration_ns,
        end_ns=end_ns,
        error=error,
        attributes=attributes,
    )
