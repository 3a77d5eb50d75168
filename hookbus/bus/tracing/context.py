"""Whether this process traces, and the W3C trace context an event carries in its ``meta``.

Shared by both sides of tracing: :mod:`hookbus.bus.tracing.producer` (the producer's spans) and
:mod:`hookbus.bus.tracing.spans` (the worker's spans, built after the fact). Here live the one
answer to "is OpenTelemetry set up here?" and the context helpers both sides read.

When is it on? When this process has loaded ``opentelemetry.trace`` and set a tracer
provider (``trace.set_tracer_provider``, or ``OTEL_PYTHON_TRACER_PROVIDER``; noticed within
a second): an application that set up OpenTelemetry has, and so has a worker run under
``opentelemetry-instrument``. Otherwise (OpenTelemetry not installed, or installed and not
set up) every entry point costs a ``sys.modules`` lookup (and, when the API is loaded, one
provider check) and hookbus imports nothing of it: the producer path keeps its start-up
budget, and spans no SDK would record are never built. The optional extra
``hookbus[otel]`` installs the API.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:
    from hookbus.bus.wire import Decision, Event

#: The instrumentation scope name spans are created under.
TRACER_NAME = "hookbus"
#: The ``meta`` keys the W3C trace context travels in.
CONTEXT_KEYS = ("traceparent", "tracestate")
_TRACE_MODULE = "opentelemetry.trace"

#: How long the answer "is a tracer provider set?" is reused, in seconds: asking the API
#: costs microseconds, and this is asked on every request.
RECHECK_S = 1.0
#: (monotonic time until which the answer holds, the answer).
_answer: tuple[float, Any] = (0.0, None)


def active_trace() -> Any:
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
    return active_trace() is not None


def propagator() -> Any:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator()


def with_context(event: Event) -> Event:
    """``event`` with the current span's trace context in its ``meta`` (a copy; the
    caller's event and meta are untouched); ``event`` itself when there is none."""
    carrier: dict[str, str] = {}
    propagator().inject(carrier)
    if not carrier:
        return event
    return msgspec.structs.replace(event, meta={**event.meta, **carrier})


def parent_context(trace: Any, meta: dict[str, Any]) -> Any:
    """The context a worker's span continues: the producer's, read from ``meta``."""
    carrier = {k: meta[k] for k in CONTEXT_KEYS if isinstance(meta.get(k), str)}
    return propagator().extract(carrier) if carrier else None


def event_attributes(event: Event) -> dict[str, Any]:
    attributes: dict[str, Any] = {"hookbus.kind": event.kind, "hookbus.event_id": event.id}
    if event.agent_id:
        attributes["hookbus.agent_id"] = event.agent_id
    if event.session_id:
        attributes["hookbus.session_id"] = event.session_id
    return attributes


def set_decided(span: Any, decision: Decision) -> None:
    span.set_attribute("hookbus.outcome", decision.outcome)
    span.set_attribute("hookbus.degraded", decision.degraded)
    if decision.request_id:
        span.set_attribute("hookbus.request_id", decision.request_id)


# --- producer side --------------------------------------------------------------------
