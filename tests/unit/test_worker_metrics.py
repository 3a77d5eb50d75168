"""Worker metrics: what an operator's Prometheus scrapes from ``--metrics-port``."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator

import pytest

from hookbus.bus.wire import Decision
from hookbus.workers.fleet.collector import FleetCollector, StreamGauge
from hookbus.workers.fleet.metrics import NO_METRICS, PrometheusMetrics


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        body: bytes = response.read()
    return body.decode()


@pytest.fixture
def served() -> Iterator[tuple[PrometheusMetrics, int]]:
    metrics = PrometheusMetrics("chain")
    server = metrics.serve(0, host="127.0.0.1")
    try:
        yield metrics, server.port
    finally:
        server.shutdown()


def test_request_outcomes_durations_and_degraded_reasons_are_scraped_over_http(
    served: tuple[PrometheusMetrics, int],
) -> None:
    metrics, port = served
    metrics.request_answered("deny", 0.002, None)
    metrics.request_answered("allow", 0.003, "hook_timeout")
    metrics.request_answered("allow", 0.001, None)

    text = scrape(port)

    assert 'hookbus_requests_total{outcome="deny"} 1.0' in text
    assert 'hookbus_requests_total{outcome="allow"} 2.0' in text
    assert 'hookbus_degraded_total{reason="hook_timeout"} 1.0' in text
    assert "hookbus_chain_duration_seconds_count 3.0" in text


def test_each_hook_has_its_own_duration_and_error_series(
    served: tuple[PrometheusMetrics, int],
) -> None:
    metrics, port = served
    metrics.hook_ran("guard", 0.0004, failed=False)
    metrics.hook_ran("flaky", 0.02, failed=True)

    text = scrape(port)

    assert 'hookbus_hook_duration_seconds_count{hook="guard"} 1.0' in text
    assert 'hookbus_hook_errors_total{hook="flaky"} 1.0' in text
    assert 'hookbus_hook_errors_total{hook="guard"}' not in text


def test_the_bundle_gauge_follows_the_served_version(served: tuple[PrometheusMetrics, int]) -> None:
    metrics, port = served
    metrics.bundle_loaded("aaa111")
    metrics.bundle_loaded("bbb222")

    text = scrape(port)

    assert 'hookbus_bundle_info{version="bbb222"} 1.0' in text
    assert "aaa111" not in text


def test_stream_lag_and_dead_letters_are_read_at_scrape_time(
    served: tuple[PrometheusMetrics, int],
) -> None:
    metrics, port = served
    reads: list[str] = []

    def read(stream: StreamGauge) -> tuple[int, int, int | None]:
        reads.append(stream.name)
        return 40, 3, 7

    metrics.add_collector(FleetCollector([StreamGauge("req", "k", "chain")], read, lambda: 5))
    assert reads == []  # registering reads nothing

    text = scrape(port)

    assert reads == ["req"]
    assert 'hookbus_stream_lag{stream="req"} 7.0' in text
    assert 'hookbus_stream_pending{stream="req"} 3.0' in text
    assert "hookbus_dlq_size 5.0" in text
    assert "hookbus_redis_up 1.0" in text


def test_entries_trimmed_before_delivery_are_exported_per_stream(
    served: tuple[PrometheusMetrics, int],
) -> None:
    metrics, port = served
    metrics.add_collector(
        FleetCollector([StreamGauge("events", "k", "fanout")], lambda stream: (10, 0, 2, 992))
    )

    text = scrape(port)

    assert 'hookbus_stream_trimmed_undelivered_total{stream="events"} 992.0' in text
    assert 'hookbus_stream_lag{stream="events"} 2.0' in text


def test_a_scrape_that_cannot_reach_redis_says_so_instead_of_failing(
    served: tuple[PrometheusMetrics, int],
) -> None:
    metrics, port = served

    def unreachable(stream: StreamGauge) -> tuple[int, int, int | None]:
        raise ConnectionError("refused")

    metrics.add_collector(FleetCollector([StreamGauge("req", "k", "chain")], unreachable))

    text = scrape(port)

    assert "hookbus_redis_up 0.0" in text
    assert "hookbus_stream_lag" not in text.replace("# HELP", "").split("hookbus_redis_up")[1]


def test_a_worker_without_a_port_records_nothing_and_imports_no_prometheus() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from hookbus.workers.fleet.metrics import NO_METRICS\n"
        "NO_METRICS.request_answered('allow', 0.1, 'x')\n"
        "NO_METRICS.hook_ran('h', 0.1, failed=True)\n"
        "assert 'prometheus_client' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    NO_METRICS.bundle_loaded("v")  # and does not raise in process either


def test_every_series_the_grafana_dashboard_queries_is_one_a_worker_exports() -> None:
    import json
    import re
    from pathlib import Path

    dashboard = json.loads(Path("deploy/grafana/hookbus.json").read_text())
    queried = {
        re.sub(r"_(bucket|count|sum)$", "", name)
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"hookbus_[a-z_]+", target["expr"])
    }
    metrics = PrometheusMetrics("chain")
    metrics.request_answered("allow", 0.001, "no_worker")
    metrics.hook_ran("h", 0.001, failed=True)
    metrics.request_expired()
    metrics.entries_reclaimed(1)
    metrics.events_dispatched(1)
    metrics.job_finished("ok")
    metrics.bundle_loaded("v1")
    metrics.shadow.labels("trial-guard", "deny").inc()
    metrics.add_collector(
        FleetCollector([StreamGauge("req", "k", "chain")], lambda s: (1, 1, 1), lambda: 0)
    )
    exported = set(re.findall(r"^(hookbus_[a-z_]+)", metrics.render().decode(), re.M))
    exported = {re.sub(r"_(bucket|count|sum|created)$", "", name) for name in exported}

    assert queried <= exported, sorted(queried - exported)


def test_every_public_method_of_the_prometheus_sink_is_a_no_op_on_the_base() -> None:
    import inspect

    from hookbus.workers.fleet.metrics import MetricsSink

    public = [
        name
        for name, member in inspect.getmembers(PrometheusMetrics, inspect.isfunction)
        if not name.startswith("_")
    ]
    assert public  # the sink has methods to compare
    missing = [name for name in public if not hasattr(MetricsSink, name)]
    assert missing == [], "add a do-nothing method to MetricsSink for each"
    for name in public:
        theirs = inspect.signature(getattr(PrometheusMetrics, name)).parameters
        ours = inspect.signature(getattr(MetricsSink, name)).parameters
        assert list(theirs) == list(ours), f"{name}: the base takes other arguments"


def test_the_do_nothing_sink_renders_and_serves_nothing_and_takes_every_report() -> None:
    assert NO_METRICS.render() == b""
    assert NO_METRICS.serve(0) is None
    NO_METRICS.decision_made(Decision(outcome="deny"), 0.1)
    NO_METRICS.job_done("h", "finished", 0.1)
    NO_METRICS.add_collector(FleetCollector([], lambda s: (0, 0, 0)))
