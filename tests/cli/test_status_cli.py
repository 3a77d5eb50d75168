"""``hookbus status`` for people: the tables fit an 80-column terminal."""

from __future__ import annotations

import time

import pytest
import redis
from rich.console import Console

from hookbus.bus.keys import Keys
from hookbus.bus.settings.loader import load_settings
from hookbus.cli.fleet.status import _status_renderable
from hookbus.workers.fleet.heartbeat import Heartbeat
from hookbus.workers.fleet.status import gather


@pytest.mark.integration
@pytest.mark.parametrize("width", [80, 160])
def test_the_status_tables_fit_the_terminal_without_truncated_headers(
    width: int, real_redis: redis.Redis, real_redis_url: str, namespace: str
) -> None:
    settings = load_settings(
        overrides={"redis_url": real_redis_url, "namespace": namespace}, environ={}
    ).settings
    beat = Heartbeat(
        real_redis,
        Keys.for_namespace(namespace),
        role="chain",
        interval_ms=50,
        info=lambda: {"version": "9ceaa88ecd09", "hooks": 12, "problems": ["x: no module"]},
    ).start()
    try:
        time.sleep(0.2)
        status = gather(real_redis, settings, rq_client=real_redis)
    finally:
        beat.stop()
    console = Console(width=width, record=True, color_system=None)
    console.print(_status_renderable(status, console.width))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= width
    assert "…" not in text, text
    for header in ("version", "hooks", "beat", "done/err", "p50/p99"):
        assert header in text, text
    [worker] = status.workers
    assert worker.info.id in text  # the id column is not squeezed away
    assert "9ceaa88ecd09" in text and "chain" in text
    assert "0.00/0.00" in text
    if width >= 120:
        assert "host:pid" in text and "uptime" in text and "role" in text
