"""``hookbus_unguarded_tool_calls_total``: tool calls that ran with no guard asked.

Counted fleet-wide in Redis by the fan-out dispatchers (:mod:`~hookbus.workers.unguarded.
report`) and read at scrape time, so every fan-out process reports the same totals (take
``max`` across them, as with the stream gauges). A scrape that cannot read Redis reports
nothing of this family rather than failing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import redis

from hookbus.workers.unguarded.report import counts

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings

log = logging.getLogger(__name__)


class UnguardedCollector:
    """The unguarded-call counts per agent and CLI, read from Redis at scrape time."""

    def __init__(self, client: redis.Redis, settings: Settings) -> None:
        self.client = client
        self.settings = settings

    def describe(self) -> list[Any]:
        return []  # collected lazily: no describe-time Redis round trip

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily

        family = CounterMetricFamily(
            "hookbus_unguarded_tool_calls",
            "Tool calls that ran (their post event arrived) with no guard asked about them.",
            labels=["agent", "cli"],
        )
        try:
            found = counts(self.client, self.settings)
        except Exception as exc:  # a scrape reports trouble, it never raises
            log.warning("metrics scrape could not read the unguarded-call counts: %s", exc)
            return
        for (agent, cli), n in sorted(found.items()):
            family.add_metric([agent, cli], n)
        yield family
