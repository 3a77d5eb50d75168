"""What workers report as they work: a metrics sink, and the Prometheus one served on
``--metrics-port``.

:class:`MetricsSink` names every report a worker makes (a request answered, a hook run, a
job done, a bundle loaded...) and does nothing with any of them: a worker started without a
port gets :data:`NO_METRICS`, an instance of it, so the call sites need no ``if``, and a
report added to the base later is a no-op for every sink that does not record it yet.

:class:`PrometheusMetrics` overrides them. Each worker process owns one, with its own
``CollectorRegistry`` (no global registry: two workers in one test process must not share
counters). Counters and histograms are updated on the request path and cost a few hundred
nanoseconds each; everything that needs Redis (stream lag, dead letters, the bundle version) is
read by :class:`~hookbus.workers.fleet.collector.FleetCollector` at scrape time, so a scrape
never adds work to a request.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from hookbus.workers.fleet.announce import announce

if TYPE_CHECKING:
    import redis
    from prometheus_client import CollectorRegistry

    from hookbus.bus.settings.loader import Settings
    from hookbus.bus.wire import Decision

log = logging.getLogger(__name__)

#: Buckets of the chain and hook duration histograms, in seconds: blocking chains live in
#: the 0.1-250 ms range, so the resolution is there.
DURATION_BUCKETS_S = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    10.0,
)


class ScrapeCollector(Protocol):
    """What a scrape-time collector offers prometheus_client: its metrics, read at scrape."""

    def collect(self) -> Iterator[Any]: ...


class MetricsSink:
    """Every report a worker makes, each doing nothing: the sink of a worker that is not
    scraped, and the base of sinks that record (override what you record; the rest stays a
    no-op). Importing or calling it loads no metrics library."""

    role = "none"

    # --- the request path --------------------------------------------------------------

    def request_answered(
        self, outcome: str, duration_s: float, degraded_reason: str | None
    ) -> None:
        """A blocking request answered with ``outcome`` after ``duration_s``; a policy
        answered instead of the hooks when ``degraded_reason`` is set."""

    def hook_ran(self, hook: str, duration_s: float, *, failed: bool) -> None:
        """One hook run took ``duration_s``; ``failed``: it failed or timed out."""

    def decision_made(
        self, decision: Decision, duration_s: float | None, degraded_reason: str | None = None
    ) -> None:
        """A blocking request answered with ``decision``, its chain taking ``duration_s``
        (None: a policy answered without running a chain)."""

    def request_expired(self) -> None:
        """A request was dropped because its deadline had passed."""

    def entries_reclaimed(self, count: int) -> None:
        """``count`` entries were taken over from a dead or stuck consumer."""

    def events_dispatched(self, count: int) -> None:
        """The fan-out dispatcher handled ``count`` events."""

    def job_finished(self, result: str) -> None:
        """A fan-out job ended with ``result``."""

    def jobs_enqueued(self, count: int) -> None:
        """The dispatcher put ``count`` fan-out jobs on the RQ queue."""

    def job_done(self, hook: str | None, status: str | None, duration_s: float) -> None:
        """An RQ job ended with RQ's ``status``, its hook running ``duration_s``."""

    def bundle_loaded(self, version: str | None) -> None:
        """The worker now serves bundle ``version``."""

    # --- exposition ---------------------------------------------------------------------

    def add_collector(self, collector: ScrapeCollector) -> None:
        """Add a scrape-time collector (a sink that is not scraped has no use for it)."""

    def render(self) -> bytes:
        """The text a scrape would get: nothing, for a sink that records nothing."""
        return b""

    def serve(self, port: int, host: str = "0.0.0.0") -> MetricsServer | None:
        """Serve the metrics on ``port``: None, for a sink that records nothing."""
        return None


class PrometheusMetrics(MetricsSink):
    """The metrics a worker updates as it works, in Prometheus form; one per process."""

    def __init__(self, role: str, registry: CollectorRegistry | None = None) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.role = role
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "hookbus_requests", "Blocking requests answered, by outcome.", ["outcome"], registry=r
        )
        self.degraded = Counter(
            "hookbus_degraded",
            "Answers a policy gave instead of the hooks, by reason.",
            ["reason"],
            registry=r,
        )
        self.chain_duration = Histogram(
            "hookbus_chain_duration_seconds",
            "Time to run a blocking chain, from read to reply.",
            buckets=DURATION_BUCKETS_S,
            registry=r,
        )
        self.hook_duration = Histogram(
            "hookbus_hook_duration_seconds",
            "Time one hook run took.",
            ["hook"],
            buckets=DURATION_BUCKETS_S,
            registry=r,
        )
        self.hook_errors = Counter(
            "hookbus_hook_errors", "Hook runs that failed or timed out.", ["hook"], registry=r
        )
        self.shadow = Counter(
            "hookbus_shadow_runs",
            "What shadow hooks would have decided (recorded, never applied), by outcome.",
            ["hook", "outcome"],
            registry=r,
        )
        self.expired = Counter(
            "hookbus_expired", "Requests dropped because their deadline had passed.", registry=r
        )
        self.reclaimed = Counter(
            "hookbus_reclaimed", "Entries taken over from a dead or stuck consumer.", registry=r
        )
        self.dispatched = Counter(
            "hookbus_events_dispatched", "Events the fan-out dispatcher handled.", registry=r
        )
        self.jobs = Counter(
            "hookbus_fanout_jobs", "Fan-out hook jobs, by result.", ["result"], registry=r
        )
        self.bundle = Gauge(
            "hookbus_bundle_info",
            "The bundle this worker serves (value 1, version in the label).",
            ["version"],
            registry=r,
        )
        self._bundle_version: str | None = None

    # --- the request path --------------------------------------------------------------

    def request_answered(
        self, outcome: str, duration_s: float, degraded_reason: str | None
    ) -> None:
        self.requests.labels(outcome).inc()
        self.chain_duration.observe(duration_s)
        if degraded_reason is not None:
            self.degraded.labels(degraded_reason).inc()

    def hook_ran(self, hook: str, duration_s: float, *, failed: bool) -> None:
        self.hook_duration.labels(hook).observe(duration_s)
        if failed:
            self.hook_errors.labels(hook).inc()

    def decision_made(
        self, decision: Decision, duration_s: float | None, degraded_reason: str | None = None
    ) -> None:
        """A blocking request answered: its outcome, the chain's time (None: a policy
        answered without running a chain, kept out of the histogram) and, from the
        decision's trace (and its shadow runs), each hook's time and failure."""
        if degraded_reason is None and decision.degraded:
            degraded_reason = "policy"
        self.requests.labels(decision.outcome).inc()
        if duration_s is not None:
            self.chain_duration.observe(duration_s)
        if degraded_reason is not None:
            self.degraded.labels(degraded_reason).inc()
        for run in decision.trace:
            if run.outcome != "skipped":
                self.hook_ran(run.hook_id, run.duration_us / 1e6, failed=run.outcome in _FAILED)
        for shadow in decision.shadow:
            self.shadow.labels(shadow.hook, shadow.outcome).inc()
            if shadow.outcome != "skipped":
                self.hook_ran(
                    shadow.hook, shadow.duration_us / 1e6, failed=shadow.outcome in _FAILED
                )

    def request_expired(self) -> None:
        self.expired.inc()

    def entries_reclaimed(self, count: int) -> None:
        if count:
            self.reclaimed.inc(count)

    def events_dispatched(self, count: int) -> None:
        if count:
            self.dispatched.inc(count)

    def job_finished(self, result: str) -> None:
        self.jobs.labels(result).inc()

    def jobs_enqueued(self, count: int) -> None:
        """Fan-out jobs the dispatcher put on the RQ queue (``result="enqueued"``)."""
        if count:
            self.jobs.labels("enqueued").inc(count)

    def job_done(self, hook: str | None, status: str | None, duration_s: float) -> None:
        """An RQ job ended (counted by the worker process that took it, whatever ran it):
        its result from RQ's job status, and its hook's run time and failure."""
        result = _JOB_RESULTS.get(status or "", "unknown")
        self.jobs.labels(result).inc()
        if hook is not None:
            self.hook_ran(hook, duration_s, failed=result != "ok")

    def bundle_loaded(self, version: str | None) -> None:
        if version == self._bundle_version:
            return
        if self._bundle_version is not None:
            self.bundle.remove(self._bundle_version)
        if version is not None:
            self.bundle.labels(version).set(1)
        self._bundle_version = version

    # --- exposition ---------------------------------------------------------------------

    def add_collector(self, collector: ScrapeCollector) -> None:
        """Register a scrape-time collector (see :class:`FleetCollector`)."""
        self.registry.register(collector)

    def render(self) -> bytes:
        """The text exposition format, as a scrape would get it (used by tests and status)."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry)

    def serve(self, port: int, host: str = "0.0.0.0") -> MetricsServer:
        """Serve ``/metrics`` on a daemon thread; ``port=0`` picks a free port."""
        from prometheus_client import start_http_server

        server, thread = start_http_server(port, addr=host, registry=self.registry)
        bound = int(server.server_address[1])
        announce("metrics for the %s worker on http://%s:%d/metrics", self.role, host, bound)

        def shutdown() -> None:
            server.shutdown()
            server.server_close()

        return MetricsServer(port=bound, shutdown=shutdown, thread=thread)


#: The shared do-nothing instance.
NO_METRICS = MetricsSink()

#: Trace outcomes of a hook run that failed.
_FAILED = frozenset({"error", "timeout"})
#: RQ job status after a run -> ``hookbus_fanout_jobs_total``'s result.
_JOB_RESULTS = {
    "finished": "ok",
    "failed": "failed",
    "scheduled": "retried",
    "queued": "retried",
    "deferred": "retried",
    "stopped": "failed",
    "canceled": "failed",
}


@dataclass(frozen=True)
class MetricsServer:
    """A running ``/metrics`` endpoint."""

    port: int
    shutdown: Callable[[], None]
    thread: Any


def start_worker_metrics(
    role: str,
    port: int | None,
    settings: Settings,
    client: redis.Redis,
    *,
    host: str = "0.0.0.0",
) -> tuple[MetricsSink, MetricsServer | None]:
    """The metrics of one worker process: :data:`NO_METRICS` when ``port`` is None (nothing
    imported, nothing served), else a :class:`PrometheusMetrics` with the role's
    :func:`fleet_collector`, served on ``port`` (0: a free one, logged)."""
    if port is None:
        return NO_METRICS, None
    from hookbus.workers.fleet.collector import JudgeCollector, fleet_collector

    metrics = PrometheusMetrics(role)
    metrics.add_collector(fleet_collector(client, settings, role))
    metrics.add_collector(JudgeCollector())
    from hookbus.workers.fleet.stream_health import role_collector

    metrics.add_collector(role_collector(client, settings.namespace, role))
    if role == "fanout":  # the dispatchers find and count the unguarded calls
        from hookbus.workers.unguarded.metrics import UnguardedCollector

        metrics.add_collector(UnguardedCollector(client, settings))
    try:
        return metrics, metrics.serve(port, host)
    except OSError as exc:  # serving the fleet matters more than being scraped
        log.error(
            "metrics port %d: %s; this %s worker serves without metrics (free the port, or "
            "pick another with --metrics-port / HOOKBUS_METRICS_PORT)",
            port,
            exc,
            role,
        )
        return NO_METRICS, None


def check_port(port: int, host: str = "0.0.0.0") -> None:
    """Raise :class:`OSError` now when ``port`` cannot be served on, so the CLI refuses to
    start (a taken port found later, in a restarted worker child, is only logged)."""
    import socket

    if port == 0:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
