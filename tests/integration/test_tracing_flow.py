"""OpenTelemetry through a real Redis: a request's producer span and the chain worker's
spans are one trace, the trace context having travelled in the event's meta."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from hookbus import HookBus
from hookbus.bus.connection import connect
from hookbus.bus.eventlog import EVENT_FIELD
from hookbus.bus.keys import Keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.tracing import context as trace_context
from hookbus.bus.wire import Event, HookResult
from hookbus.hooks.registry import HookRegistry
from hookbus.workers.chain.worker import run_chain_worker
from hookbus.workers.fanout import jobs
from hookbus.workers.fleet.heartbeat import list_workers
from tests.blocking_helpers import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace._TRACER_PROVIDER = provider  # reset below: later tests run untraced
    trace_context.recheck()
    try:
        yield exporter
    finally:
        trace._TRACER_PROVIDER = None
        trace_context.recheck()
        provider.shutdown()


def test_the_worker_s_chain_and_hook_spans_continue_the_producer_s_trace(
    spans: InMemorySpanExporter, real_redis_url: str, namespace: str
) -> None:
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    registry = HookRegistry()
    seen: list[dict[str, object]] = []

    def guard(event: Event) -> HookResult:
        seen.append(dict(event.meta))
        return HookResult(outcome="deny", reason="traced")

    registry.register("guard", guard, events="PreToolUse")
    registry.register("first", lambda event: None, events="PreToolUse", priority=1)
    stop = threading.Event()
    worker = threading.Thread(
        target=run_chain_worker,
        kwargs={"settings": settings, "registry": registry, "stop_event": stop, "supervise": False},
        daemon=True,
    )
    worker.start()
    bus = HookBus(settings)
    keys = Keys.for_namespace(namespace)
    client = connect(real_redis_url)
    try:
        wait_for(lambda: list_workers(client, keys), what="the chain worker's heartbeat")
        decision = bus.request(Event(kind="PreToolUse", agent_id="a1"), deadline_ms=5000)
        assert (decision.outcome, decision.reason) == ("deny", "traced")

        def finished() -> dict[str, ReadableSpan]:
            return {s.name: s for s in spans.get_finished_spans()}

        found = wait_for(
            lambda: "hookbus.chain PreToolUse" in finished() and finished(), what="chain span"
        )
    finally:
        bus.close()
        stop.set()
        worker.join(timeout=10)

    producer = found["hookbus.request PreToolUse"]
    chain = found["hookbus.chain PreToolUse"]
    assert producer.context is not None and chain.context is not None
    assert chain.parent is not None and chain.parent.span_id == producer.context.span_id
    assert chain.context.trace_id == producer.context.trace_id
    assert str(seen[0]["traceparent"]).startswith(f"00-{producer.context.trace_id:032x}-")
    for name in ("hookbus.hook first", "hookbus.hook guard"):
        hook = found[name]
        assert hook.parent is not None and hook.parent.span_id == chain.context.span_id
    assert chain.attributes is not None and chain.attributes["hookbus.outcome"] == "deny"


def test_a_fan_out_job_s_hook_span_continues_the_publisher_s_trace(
    spans: InMemorySpanExporter, real_redis_url: str, namespace: str
) -> None:
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    registry = HookRegistry()
    registry.register("telemetry", lambda event: None, events="PostToolUse")
    keys = Keys.for_namespace(namespace)
    client = connect(real_redis_url)
    bus = HookBus(settings)
    try:
        bus.publish(Event(kind="PostToolUse", agent_id="a1"))
    finally:
        bus.close()
    entries: Any = client.xrange(keys.events)
    ((_, fields),) = entries
    jobs.install(jobs.JobContext(settings=settings, registry=registry, bus=client, keys=keys))
    try:
        jobs.run_hook_job("telemetry", fields[EVENT_FIELD])
    finally:
        jobs.uninstall()

    found = {s.name: s for s in spans.get_finished_spans()}
    publish = found["hookbus.publish PostToolUse"]
    job = found["hookbus.hook telemetry"]
    assert publish.context is not None and job.context is not None
    assert job.parent is not None and job.parent.span_id == publish.context.span_id
    assert job.context.trace_id == publish.context.trace_id
    assert job.attributes is not None and job.attributes["hookbus.agent_id"] == "a1"
