"""Request observers behind the decision log's trim, on a real Redis: the entries trimmed
before the ``observe`` group read them are counted (``decisions:lost``), and ``status``,
the metrics and the console show the count as they do for the other streams."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import redis

from hookbus.bus import keys
from hookbus.bus.keys import OBSERVE_GROUP
from hookbus.bus.settings.loader import Settings, StreamSettings
from hookbus.workers.fanout.observer import RequestObserver
from hookbus.workers.fleet.backlog import stream_status
from hookbus.workers.fleet.collector import fleet_collector
from tests.console_helpers import TOKEN, ConsoleProc

MAXLEN = 50


class _ObservesNothing:
    """The records are of a kind no hook observes: the observer reads and acknowledges them."""

    def observes(self, kind: str) -> bool:
        return False


def _log_decisions(client: redis.Redis, key: str, count: int) -> None:
    """``count`` decision-log entries, trimmed to :data:`MAXLEN` as the log's writers do."""
    with client.pipeline(transaction=False) as pipe:
        for i in range(count):
            pipe.xadd(
                key, {b"kind": b"Stop", b"id": f"r{i}".encode()}, maxlen=MAXLEN, approximate=False
            )
        pipe.execute()


def _drain(observer: RequestObserver) -> int:
    handled = 0
    while step := observer.step():
        handled += step
    return handled


def test_entries_trimmed_before_the_observers_read_them_are_counted_and_shown(
    real_redis: redis.Redis, real_redis_url: str, namespace: str, tmp_path: Path
) -> None:
    settings = Settings(
        redis_url=real_redis_url,
        namespace=namespace,
        streams=StreamSettings(decisions_maxlen=MAXLEN),
    )
    log_key = keys.Keys.for_namespace(namespace).decisions
    observer = RequestObserver(settings, _ObservesNothing(), stream=real_redis)
    observer.ensure_group()
    _log_decisions(real_redis, log_key, 20)
    assert _drain(observer) == 20
    _log_decisions(real_redis, log_key, 1_480)  # the observers fall 1,480 behind
    assert _drain(observer) == MAXLEN  # what the trim left
    lost = 1_500 - 20 - MAXLEN
    assert real_redis.get(keys.trimmed_undelivered(log_key)) == str(lost).encode()
    status = stream_status(real_redis, "decisions", log_key)
    assert status.lost == lost
    (group,) = status.groups
    assert (group.name, group.lag, group.pending) == (OBSERVE_GROUP, 0, 0)
    _log_decisions(real_redis, log_key, 10)  # caught up again: nothing more is lost
    assert _drain(observer) == 10
    assert stream_status(real_redis, "decisions", log_key).lost == lost

    samples = {
        (s.name, s.labels.get("stream")): s.value
        for metric in fleet_collector(real_redis, settings, "fanout").collect()
        for s in metric.samples
    }
    assert samples[("hookbus_stream_trimmed_undelivered_total", "decisions")] == lost
    assert samples[("hookbus_stream_lag", "decisions")] == 0

    env = {"HOOKBUS_REDIS_URL": real_redis_url, "HOOKBUS_NAMESPACE": namespace, "PATH": ""}
    cmd = [sys.executable, "-m", "hookbus", "status"]
    shown = subprocess.run([*cmd, "--json"], env=env, capture_output=True, text=True, timeout=60)
    streams = {s["name"]: s for s in json.loads(shown.stdout)["streams"]}
    assert streams["decisions"]["lost"] == lost
    for_people = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert f"decisions: {lost} entries were trimmed before" in for_people.stdout
    assert "streams.decisions_maxlen" in for_people.stdout

    console = ConsoleProc(real_redis_url, namespace, tmp_path)
    try:
        page = httpx.get(
            f"{console.base}/", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
        )
    finally:
        console.stop()
    row = " ".join(page.text.split()).split("<td>decisions</td>", 1)[1].split("</tr>", 1)[0]
    assert f'<td class="lost">{lost}</td>' in row, row
