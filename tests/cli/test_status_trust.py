"""``hookbus status`` says what an operator must not miss: unsigned or refused bundles,
unhealthy or unconfined workers, and a broken change history."""

from __future__ import annotations

import time

import pytest
import redis
from rich.console import Console

from hookbus.bundles import history
from hookbus.bus.keys import Keys
from hookbus.bus.settings.loader import load_settings
from hookbus.cli.fleet.status import _history, _status_renderable
from hookbus.workers.fleet.heartbeat import Heartbeat
from hookbus.workers.fleet.status import gather

pytestmark = pytest.mark.integration


def render(client: redis.Redis, url: str, ns: str, info: dict[str, object]) -> str:
    settings = load_settings(overrides={"redis_url": url, "namespace": ns}, environ={}).settings
    beat = Heartbeat(
        client, Keys.for_namespace(ns), role="chain", interval_ms=50, info=lambda: info
    ).start()
    try:
        time.sleep(0.2)
        status = gather(client, settings, rq_client=client)
    finally:
        beat.stop()
    console = Console(width=200, record=True, color_system=None)
    console.print(_status_renderable(status, console.width, _history(client, ns)))
    return console.export_text()


def test_unsigned_and_refused_bundles_and_unconfined_workers_are_called_out(
    real_redis: redis.Redis, real_redis_url: str, namespace: str
) -> None:
    info = {
        "version": "aaa",
        "trust": "unsigned",
        "refused": {"version": "bbb", "reason": "signature does not verify", "at_ms": 1},
        "unhealthy": "bundle declares guard 'g' but it failed to load",
        "confinement": "none (no landlock, no bubblewrap)",
    }

    text = render(real_redis, real_redis_url, namespace, info)

    assert "UNSIGNED: 1 worker(s)" in text
    assert "REFUSED:" in text and "refused bundle bbb: signature does not verify" in text
    assert "UNHEALTHY:" in text and "guard 'g'" in text
    assert "UNCONFINED:" in text


def test_refused_agent_hooks_and_left_out_guards_are_called_out(
    real_redis: redis.Redis, real_redis_url: str, namespace: str
) -> None:
    info = {
        "version": "aaa",
        "trust": "verified:abcd",
        "confinement": "pid+user namespace; agent hooks refused: no confinement of their own: "
        "no sandbox: bwrap, setpriv or prlimit is missing",
        "missing_guards": ["PromptSubmit"],
    }

    text = render(real_redis, real_redis_url, namespace, info)

    assert "AGENT HOOKS REFUSED:" in text and "bwrap" in text
    assert "GUARD LEFT OUT:" in text and "PromptSubmit" in text
    assert "UNCONFINED" not in text


def test_a_verified_healthy_fleet_shows_no_warning_lines(
    real_redis: redis.Redis, real_redis_url: str, namespace: str
) -> None:
    info = {"version": "aaa", "trust": "verified:abcd", "confinement": "landlock"}

    text = render(real_redis, real_redis_url, namespace, info)

    for word in ("UNSIGNED", "REFUSED", "UNHEALTHY", "UNCONFINED", "HISTORY BROKEN", "GUARD"):
        assert word not in text


def test_an_edited_history_entry_is_reported_as_a_broken_chain(
    real_redis: redis.Redis, real_redis_url: str, namespace: str
) -> None:
    for hook in ("a", "b", "c"):
        history.append(real_redis, namespace, action="write", actor="op", hook=hook, sha256="0")
    key = Keys.for_namespace(namespace)
    stream = next(iter(real_redis.keys(f"*{namespace}*history*")))
    first_id = real_redis.xrange(stream, count=1)[0][0]
    real_redis.xdel(stream, first_id)  # an attacker removes the first change
    assert key.ns == namespace

    text = render(real_redis, real_redis_url, namespace, {"version": "aaa"})

    assert "HISTORY BROKEN" in text
