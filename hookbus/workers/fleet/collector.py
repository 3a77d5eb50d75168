"""What a scrape reads from Redis: stream length, pending entries and lag, and dead letters.

Everything that needs Redis is read when Prometheus scrapes a worker's ``/metrics``, never on
the request path: :class:`FleetCollector` asks its readers at collect time and reports
``hookbus_redis_up 0`` instead of failing when Redis cannot be read.
:func:`fleet_collector` builds the one a worker role registers with its
:class:`~hookbus.workers.fleet.metrics.PrometheusMetrics`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import redis
    from prometheus_client.core import Metric

    from hookbus.bus.settings.loader import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StreamGauge:
    """One stream whose length, pending and lag :class:`FleetCollector` reports."""

    name: str
    key: str
    group: str
    #: Which partition of the request or event stream (its own label value past 0).
    partition: int = 0


class FleetCollector:
    """Reads stream lag, pending entries and dead letters from Redis at scrape time.

    ``read_streams`` returns ``(length, pending, lag)`` per stream (and, fourth, the entries
    found trimmed before delivery, when it knows them) and ``count_dead`` the
    number of dead letters; both are passed in so that this module needs no Redis code of
    its own and a scrape that can't reach Redis reports ``hookbus_up 0`` instead of failing.
    """

    def __init__(
        self,
        streams: Iterable[StreamGauge],
        read_stream: Callable[[StreamGauge], tuple[int | None, ...]],
        count_dead: Callable[[], int] | None = None,
    ) -> None:
        self.streams = list(streams)
        self.read_stream = read_stream
        self.count_dead = count_dead

    def describe(self) -> list[Metric]:
        return []  # collected lazily: no describe-time Redis round trip

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        up = GaugeMetricFamily("hookbus_redis_up", "1 when the last scrape could read Redis.")
        length = GaugeMetricFamily(
            "hookbus_stream_length", "Entries in the stream.", labels=["stream"]
        )
        pending = GaugeMetricFamily(
            "hookbus_stream_pending",
            "Entries delivered to a consumer and not acknowledged yet.",
            labels=["stream"],
        )
        lag = GaugeMetricFamily(
            "hookbus_stream_lag",
            "Entries not yet read by the stream's consumer group (what KEDA scales on).",
            labels=["stream"],
        )
        lost = CounterMetricFamily(
            "hookbus_stream_trimmed_undelivered",
            "Entries trimmed from the stream before its consumer group read them.",
            labels=["stream"],
        )
        dead = GaugeMetricFamily("hookbus_dlq_size", "Dead letters waiting for an operator.")
        ok = 1
        try:
            for stream in self.streams:
                n, p, g, *rest = self.read_stream(stream)
                length.add_metric([stream.name], n or 0)
                pending.add_metric([stream.name], p or 0)
                if g is not None:
                    lag.add_metric([stream.name], g)
                if rest and rest[0] is not None:
                    lost.add_metric([stream.name], rest[0])
            if self.count_dead is not None:
                dead.add_metric([], self.count_dead())
        except Exception as exc:  # a scrape reports trouble, it never raises
            log.warning("metrics scrape could not read Redis: %s", exc)
            ok = 0
        up.add_metric([], ok)
        yield up
        if ok:
            yield length
            yield pending
            yield lag
            yield lost
            if self.count_dead is not None:
                yield dead


#: The streams each role reports at scrape time: (metric label, Keys attribute, group).
ROLE_STREAMS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "chain": (("requests", "requests", "chain"),),
    # the fan-out role runs the request observers, the decision log's readers
    "fanout": (("events", "events", "fanout"), ("decisions", "decisions", "observe")),
    "rq": (),  # its queue's depth is RQ's; the dead letters are reported
}


def fleet_collector(client: redis.Redis, settings: Settings, role: str) -> FleetCollector:
    """Stream length / pending / lag (the group's XINFO GROUPS ``lag``, what KEDA's
    redis-streams trigger reads too) and the dead letters of both sources, read at scrape
    time with ``client``. With ``partitions`` > 1 every partition's stream has its own
    label value (``events``, ``events p1``, ... as ``hookbus status`` names them), read on
    a Redis Cluster from the master serving it."""
    from hookbus.bus.connection import is_cluster_url, partition_client
    from hookbus.bus.keys import Keys
    from hookbus.workers.fleet.backlog import stream_status
    from hookbus.workers.fleet.dead_letters import count_dead
    from hookbus.workers.fleet.status import partition_name

    streams = [
        StreamGauge(
            partition_name(name, p),
            getattr(Keys.for_partition(settings.namespace, p), attribute),
            group,
            p,
        )
        for name, attribute, group in ROLE_STREAMS.get(role, ())
        for p in range(settings.partitions)
    ]
    on_cluster = is_cluster_url(settings.effective_redis_url)

    def read(stream: StreamGauge) -> tuple[int | None, ...]:
        here = partition_client(settings, stream.partition) if on_cluster else client
        status = stream_status(here if stream.partition else client, stream.name, stream.key)
        for group in status.groups:
            if group.name == stream.group:
                return status.length, group.pending, group.lag, status.lost
        # no group yet: nothing has been read
        return status.length, 0, status.length, status.lost

    rq_clients: list[redis.Redis] = []

    def dead() -> int:
        if not rq_clients:  # RQ's Redis (the failed-job registry), connected once
            from hookbus.bus.connection import connect

            same = settings.effective_rq_redis_url == settings.effective_redis_url
            rq_clients.append(client if same else connect(settings.effective_rq_redis_url))
        return count_dead(rq_clients[0], settings)

    return FleetCollector(streams, read, dead)


class JudgeCollector:
    """This process's judge hooks at scrape time (:func:`hookbus.hooks.actions.llm.
    judge_stats`): model calls, verdicts shared without a call, failures by cause, tokens,
    and the median of recent calls. Read from memory: a scrape costs no model call."""

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        from hookbus.hooks.actions.llm import judge_stats

        stats = judge_stats()
        calls = CounterMetricFamily(
            "hookbus_judge_calls", "Model calls of a judge hook", labels=["hook"]
        )
        served = CounterMetricFamily(
            "hookbus_judge_shared",
            "Verdicts of a judge hook served without a model call (cache, or a call in flight)",
            labels=["hook"],
        )
        failures = CounterMetricFamily(
            "hookbus_judge_failures", "Failed judge calls, by cause", labels=["hook", "cause"]
        )
        tokens = CounterMetricFamily(
            "hookbus_judge_tokens", "Tokens the model server reported", labels=["hook"]
        )
        median = GaugeMetricFamily(
            "hookbus_judge_call_median_seconds",
            "Median of a judge hook's recent model calls",
            labels=["hook"],
        )
        for hook, one in stats.items():
            calls.add_metric([hook], one["calls"])
            served.add_metric([hook], one["served"])
            tokens.add_metric([hook], one["tokens"])
            for cause, count in one["failures"].items():
                failures.add_metric([hook, cause], count)
            if one["p50_ms"] is not None:
                median.add_metric([hook], one["p50_ms"] / 1000)
        yield from (calls, served, failures, tokens, median)
