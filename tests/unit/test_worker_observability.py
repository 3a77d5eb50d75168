"""What a worker feeds its metrics and its log from one decision: outcome, chain time, each
hook run's time and failure (shadow runs included), and one structured line per hook run."""

from __future__ import annotations

import json
import logging

import pytest

from hookbus.bus.wire import Decision, Event, HookRun, ShadowRun
from hookbus.cli.logs import JsonFormatter
from hookbus.workers.fleet import hook_run_log
from hookbus.workers.fleet.metrics import NO_METRICS, PrometheusMetrics, start_worker_metrics

DECISION = Decision(
    outcome="deny",
    reason="no",
    request_id="req-1",
    trace=[
        HookRun(hook_id="first", outcome="continue", duration_us=1500),
        HookRun(hook_id="flaky", outcome="timeout", duration_us=9000, error="too slow"),
        HookRun(hook_id="guard", outcome="deny", duration_us=300),
        HookRun(hook_id="later", outcome="skipped"),
    ],
    shadow=[ShadowRun(hook="trial", outcome="deny", reason="would", duration_us=700)],
)
EVENT = Event(kind="PreToolUse", id="ev-1", request_id="req-1")


def sample(metrics: PrometheusMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_a_decision_counts_its_outcome_and_every_hook_run_of_its_trace_and_shadow() -> None:
    metrics = PrometheusMetrics("chain")

    metrics.decision_made(DECISION, 0.012)

    assert sample(metrics, "hookbus_requests_total", outcome="deny") == 1
    assert sample(metrics, "hookbus_chain_duration_seconds_count") == 1
    assert sample(metrics, "hookbus_hook_duration_seconds_count", hook="first") == 1
    assert sample(metrics, "hookbus_hook_duration_seconds_sum", hook="guard") == pytest.approx(
        0.0003
    )
    assert sample(metrics, "hookbus_hook_errors_total", hook="flaky") == 1
    assert sample(metrics, "hookbus_hook_errors_total", hook="guard") is None
    assert sample(metrics, "hookbus_hook_duration_seconds_count", hook="trial") == 1
    assert sample(metrics, "hookbus_hook_duration_seconds_count", hook="later") is None
    assert sample(metrics, "hookbus_shadow_runs_total", hook="trial", outcome="deny") == 1


def test_a_policy_answer_counts_as_degraded_with_its_reason() -> None:
    metrics = PrometheusMetrics("chain")
    metrics.decision_made(Decision(outcome="allow", degraded=True), None, "incomplete_set")
    metrics.decision_made(Decision(outcome="deny", degraded=True), 0.004)
    assert sample(metrics, "hookbus_degraded_total", reason="incomplete_set") == 1
    assert sample(metrics, "hookbus_degraded_total", reason="policy") == 1
    assert sample(metrics, "hookbus_requests_total", outcome="allow") == 1
    # no chain ran for the first: only the second's time is in the histogram
    assert sample(metrics, "hookbus_chain_duration_seconds_count") == 1


def test_without_a_port_a_worker_gets_the_metrics_that_record_nothing() -> None:
    metrics, server = start_worker_metrics("chain", None, None, None)  # type: ignore[arg-type]
    assert metrics is NO_METRICS and server is None
    metrics.decision_made(DECISION, 0.1)  # a no-op, not an error


def test_one_json_line_per_hook_run_with_the_structured_fields(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger=hook_run_log.__name__):
        hook_run_log.log_decision_runs(EVENT, DECISION, worker="w1", bundle_version="v9")

    lines = [json.loads(JsonFormatter().format(r)) for r in caplog.records]
    assert [(d["hook"], d["outcome"]) for d in lines] == [
        ("first", "continue"),
        ("flaky", "timeout"),
        ("guard", "deny"),
        ("trial", "deny"),
    ]
    flaky = lines[1]
    assert flaky["level"] == "INFO"
    assert flaky["kind"] == "PreToolUse"
    assert flaky["duration_ms"] == 9.0
    assert (flaky["worker"], flaky["bundle_version"]) == ("w1", "v9")
    assert (flaky["request_id"], flaky["event_id"]) == ("req-1", "ev-1")
    assert flaky["error"] == "too slow"
    assert lines[3]["shadow"] is True and "shadow" not in lines[2]


def test_a_fan_out_job_run_logs_one_line_naming_its_event(
    caplog: pytest.LogCaptureFixture,
) -> None:
    events = [Event(kind="PostToolUse", id="e1"), Event(kind="PostToolUse", id="e2")]
    with caplog.at_level(logging.INFO, logger=hook_run_log.__name__):
        hook_run_log.log_job_run(
            "telemetry",
            events,
            outcome="error",
            duration_us=2500,
            worker="rq-1",
            bundle_version=None,
            error="boom",
        )
    (record,) = caplog.records
    data = json.loads(JsonFormatter().format(record))
    assert (data["hook"], data["kind"], data["outcome"]) == ("telemetry", "PostToolUse", "error")
    assert (data["event_id"], data["request_id"], data["events"]) == ("e1", "e1", 2)
    assert data["duration_ms"] == 2.5 and data["error"] == "boom"


def test_with_info_off_nothing_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger=hook_run_log.__name__):
        hook_run_log.log_decision_runs(EVENT, DECISION, worker="w1", bundle_version=None)
    assert caplog.records == []
