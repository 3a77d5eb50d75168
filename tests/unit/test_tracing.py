"""OpenTelemetry spans (issue 15 point 1): the producer's span context travels in
``event.meta``, the worker's spans continue it, and a process without OpenTelemetry loaded
imports nothing and makes no span."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from hookbus.bus.tracing import context as trace_context
from hookbus.bus.tracing import producer as tracing
from hookbus.bus.tracing import spans as span_records
from hookbus.bus.wire import Decision, Event, HookRun, ShadowRun


def _install(provider: TracerProvider | None) -> None:
    """Set (None: unset) the process's tracer provider. The API allows setting it once per
    process; the tests reset it so that every later test runs as in a process that never
    set OpenTelemetry up (OpenTelemetry's own tests reset these globals the same way)."""
    trace._TRACER_PROVIDER = provider
    trace_context.recheck()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """A tracer provider recording into an in-memory exporter, for this test only."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _install(provider)
    try:
        yield exporter
    finally:
        _install(None)
        provider.shutdown()


class FakeClient:
    """Stands for HookBus: what the request and publish decorators wrap."""

    def __init__(self) -> None:
        self.sent: list[Event] = []

    @tracing.traced_request
    def request(self, event: Event, *, deadline_ms: int | None = None) -> Decision:
        self.sent.append(event)
        return Decision(outcome="deny", request_id="r1")

    @tracing.traced_publish
    def publish(self, event: Event) -> str:
        self.sent.append(event)
        return event.id


def context_of(span: ReadableSpan) -> trace.SpanContext:
    context = span.get_span_context()
    assert context is not None
    return context


def by_name(spans: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    return {span.name: span for span in spans.get_finished_spans()}


def test_a_request_span_sends_its_context_in_the_event_meta(
    spans: InMemorySpanExporter,
) -> None:
    client = FakeClient()
    event = Event(kind="PreToolUse", agent_id="a1", meta={"cwd": "/w"})

    decision = client.request(event, deadline_ms=100)

    assert decision.outcome == "deny"
    (sent,) = client.sent
    assert sent.meta["cwd"] == "/w" and event.meta == {"cwd": "/w"}  # the caller's untouched
    span = by_name(spans)["hookbus.request PreToolUse"]
    assert span.kind == trace.SpanKind.CLIENT
    context = context_of(span)
    assert sent.meta["traceparent"].startswith(
        f"00-{context.trace_id:032x}-{context.span_id:016x}-"
    )
    assert span.attributes is not None
    assert span.attributes["hookbus.outcome"] == "deny"
    assert span.attributes["hookbus.agent_id"] == "a1"


def test_the_worker_chain_span_continues_the_producer_trace_with_a_span_per_hook_run(
    spans: InMemorySpanExporter,
) -> None:
    client = FakeClient()
    client.request(Event(kind="PreToolUse"))
    sent = client.sent[0]
    decision = Decision(
        outcome="deny",
        reason="no",
        trace=[
            HookRun(hook_id="first", outcome="continue", duration_us=1000),
            HookRun(hook_id="guard", outcome="deny", duration_us=2000),
            HookRun(hook_id="later", outcome="skipped"),
        ],
        shadow=[ShadowRun(hook="trial", outcome="error", reason="boom", duration_us=500)],
    )

    span_records.record_chain(
        sent, decision, end_ns=10_000_000_000, duration_ns=5_000_000, worker="w1"
    )

    found = by_name(spans)
    producer = context_of(found["hookbus.request PreToolUse"])
    chain = found["hookbus.chain PreToolUse"]
    assert chain.kind == trace.SpanKind.SERVER
    assert chain.context is not None and chain.parent is not None
    assert chain.context.trace_id == producer.trace_id
    assert chain.parent.span_id == producer.span_id
    assert (chain.start_time, chain.end_time) == (9_995_000_000, 10_000_000_000)
    hooks = {name: s for name, s in found.items() if name.startswith("hookbus.hook ")}
    assert sorted(hooks) == ["hookbus.hook first", "hookbus.hook guard", "hookbus.hook trial"]
    for span in hooks.values():
        assert span.parent is not None and span.parent.span_id == chain.context.span_id
    first, guard = hooks["hookbus.hook first"], hooks["hookbus.hook guard"]
    assert (first.start_time, first.end_time) == (9_995_000_000, 9_996_000_000)
    assert (guard.start_time, guard.end_time) == (9_996_000_000, 9_998_000_000)
    trial = hooks["hookbus.hook trial"]
    assert trial.status.status_code == trace.StatusCode.ERROR
    assert trial.attributes is not None and trial.attributes["hookbus.shadow"] is True


def test_a_fan_out_job_span_is_a_child_of_the_publish_span(spans: InMemorySpanExporter) -> None:
    client = FakeClient()
    client.publish(Event(kind="PostToolUse"))

    span_records.record_job(
        "telemetry",
        client.sent,
        outcome="continue",
        end_ns=2_000_000_000,
        duration_ns=1_000_000,
        error=None,
        worker="rq-1",
    )

    found = by_name(spans)
    publish = context_of(found["hookbus.publish PostToolUse"])
    job = found["hookbus.hook telemetry"]
    assert job.parent is not None and job.parent.span_id == publish.span_id
    assert job.context is not None and job.context.trace_id == publish.trace_id


def test_an_event_without_trace_context_starts_a_new_trace(spans: InMemorySpanExporter) -> None:
    span_records.record_chain(
        Event(kind="Stop"), Decision(), end_ns=2_000_000, duration_ns=1_000, worker=None
    )
    (chain,) = spans.get_finished_spans()
    assert chain.parent is None


def test_without_opentelemetry_loaded_nothing_is_imported_and_nothing_changes() -> None:
    code = (
        "import sys\n"
        "from hookbus.bus.tracing import context as trace_context, producer as tracing\n"
        "from hookbus.bus.tracing import spans as span_records\n"
        "from hookbus.bus.wire import Decision, Event\n"
        "import hookbus.producers.sync_client\n"
        "class C:\n"
        "    @tracing.traced_request\n"
        "    def request(self, event):\n"
        "        return Decision(request_id=event.meta.get('traceparent'))\n"
        "d = C().request(Event(kind='PreToolUse'))\n"
        "span_records.record_chain(Event(kind='Stop'), d, end_ns=1, duration_ns=1, worker=None)\n"
        "assert d.request_id is None, d\n"
        "assert not trace_context.enabled()\n"
        "loaded = [m for m in sys.modules if m.startswith('opentelemetry')]\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_with_the_api_loaded_but_no_tracer_provider_set_nothing_is_traced() -> None:
    code = (
        "import opentelemetry.trace\n"
        "from hookbus.bus.tracing import context as trace_context, producer as tracing\n"
        "from hookbus.bus.tracing import spans as span_records\n"
        "from hookbus.bus.wire import Decision, Event\n"
        "class C:\n"
        "    @tracing.traced_request\n"
        "    def request(self, event):\n"
        "        return Decision(request_id=event.meta.get('traceparent'))\n"
        "assert not trace_context.enabled()\n"
        "assert C().request(Event(kind='PreToolUse')).request_id is None\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_decorated_methods_keep_their_names_and_docs() -> None:
    assert FakeClient.request.__name__ == "request"
    method: Any = FakeClient.publish
    assert method.__wrapped__.__name__ == "publish"


class FakeAsyncClient:
    """Stands for AsyncHookBus."""

    def __init__(self) -> None:
        self.sent: list[Event] = []

    @tracing.traced_arequest
    async def request(self, event: Event) -> Decision:
        self.sent.append(event)
        return Decision(outcome="allow")

    @tracing.traced_apublish
    async def publish(self, event: Event) -> str:
        self.sent.append(event)
        return event.id


async def test_the_async_client_s_request_and_publish_are_traced_the_same_way(
    spans: InMemorySpanExporter,
) -> None:
    client = FakeAsyncClient()

    assert (await client.request(Event(kind="PreToolUse"))).outcome == "allow"
    await client.publish(Event(kind="Stop"))

    found = by_name(spans)
    for name, sent in zip(
        ("hookbus.request PreToolUse", "hookbus.publish Stop"), client.sent, strict=True
    ):
        context = context_of(found[name])
        assert sent.meta["traceparent"].startswith(f"00-{context.trace_id:032x}-")
    assert found["hookbus.publish Stop"].kind == trace.SpanKind.PRODUCER
