"""OpenTelemetry spans on the producer side: a client's request or publish, its context sent.

:func:`traced_request` (and :func:`traced_arequest` for ``async def``, :func:`traced_publish`
/ :func:`traced_apublish` for events) wraps a client method in a span and writes the W3C
trace context (``traceparent``, ``tracestate``) of that span into the event's ``meta``, so
whoever handles the event continues the same trace. The worker's side of the trace is
:mod:`hookbus.bus.tracing.spans`; whether anything is traced at all is decided in
:mod:`hookbus.bus.tracing.context` (nothing of OpenTelemetry is imported when it is off).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from hookbus.bus.tracing.context import (
    TRACER_NAME,
    active_trace,
    event_attributes,
    set_decided,
    with_context,
)

if TYPE_CHECKING:
    from hookbus.bus.wire import Event

#: A decorated client method: its signature is kept as it is, for callers and type checks.
_F = TypeVar("_F", bound=Callable[..., Any])


def traced_request(fn: _F) -> _F:
    """Decorate a client's ``request(self, event, ...)``: a CLIENT span around the call,
    its context sent in ``event.meta``."""

    @functools.wraps(fn)
    def request(self: Any, event: Event, *args: Any, **kwargs: Any) -> Any:
        trace = active_trace()
        if trace is None:
            return fn(self, event, *args, **kwargs)
        tracer = trace.get_tracer(TRACER_NAME)
        with tracer.start_as_current_span(
            f"hookbus.request {event.kind}",
            kind=trace.SpanKind.CLIENT,
            attributes=event_attributes(event),
        ) as span:
            decision = fn(self, with_context(event), *args, **kwargs)
            set_decided(span, decision)
            return decision

    return cast("_F", request)


def traced_arequest(fn: _F) -> _F:
    """:func:`traced_request` for an ``async def request``."""

    @functools.wraps(fn)
    async def request(self: Any, event: Event, *args: Any, **kwargs: Any) -> Any:
        trace = active_trace()
        if trace is None:
            return await fn(self, event, *args, **kwargs)
        tracer = trace.get_tracer(TRACER_NAME)
        with tracer.start_as_current_span(
            f"hookbus.request {event.kind}",
            kind=trace.SpanKind.CLIENT,
            attributes=event_attributes(event),
        ) as span:
            decision = await fn(self, with_context(event), *args, **kwargs)
            set_decided(span, decision)
            return decision

    return cast("_F", request)


def traced_publish(fn: _F) -> _F:
    """Decorate a client's ``publish(self, event)``: a PRODUCER span, its context sent in
    ``event.meta`` so the fan-out jobs' hook runs join the trace."""

    @functools.wraps(fn)
    def publish(self: Any, event: Event, *args: Any, **kwargs: Any) -> Any:
        trace = active_trace()
        if trace is None:
            return fn(self, event, *args, **kwargs)
        tracer = trace.get_tracer(TRACER_NAME)
        with tracer.start_as_current_span(
            f"hookbus.publish {event.kind}",
            kind=trace.SpanKind.PRODUCER,
            attributes=event_attributes(event),
        ):
            return fn(self, with_context(event), *args, **kwargs)

    return cast("_F", publish)


def traced_apublish(fn: _F) -> _F:
    """:func:`traced_publish` for an ``async def publish``."""

    @functools.wraps(fn)
    async def publish(self: Any, event: Event, *args: Any, **kwargs: Any) -> Any:
        trace = active_trace()
        if trace is None:
            return await fn(self, event, *args, **kwargs)
        tracer = trace.get_tracer(TRACER_NAME)
        with tracer.start_as_current_span(
            f"hookbus.publish {event.kind}",
            kind=trace.SpanKind.PRODUCER,
            attributes=event_attributes(event),
        ):
            return await fn(self, with_context(event), *args, **kwargs)

    return cast("_F", publish)


# --- worker side ----------------------------------------------------------------------
