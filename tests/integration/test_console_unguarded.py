"""The console's Overview shows the tool calls that ran with no guard asked: their count on
a card and the latest of them in a table, inert to what an agent put in its ids."""

from __future__ import annotations

from pathlib import Path

import httpx
import redis

from hookbus.bus.keys import Keys
from hookbus.workers.unguarded.report import record_unguarded
from tests.console_helpers import TOKEN, ConsoleProc
from tests.unguarded_helpers import tool_call

BEARER = {"Authorization": f"Bearer {TOKEN}"}


def test_the_overview_lists_unguarded_calls_and_counts_them(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    keys = Keys.for_namespace(namespace)
    record_unguarded(
        real_redis,
        keys,
        [
            tool_call("PostToolUse", "ls", agent="build-bot", session="s-41", harness="copilot"),
            tool_call("PostToolUse", "ls", agent="<img src=x onerror=alert(1)>", session="s-42"),
        ],
    )
    console = ConsoleProc(real_redis_url, namespace, tmp_path)
    try:
        page = httpx.get(f"{console.base}/", headers=BEARER, timeout=10)
    finally:
        console.stop()
    assert page.status_code == 200
    text = " ".join(page.text.split())
    assert (
        '<div class="card bad" id="unguarded-card"><h2>Unguarded tool calls</h2>'
        '<p class="big">2</p>' in text
    )
    assert '<td>build-bot</td><td>copilot</td><td class="mono">s-41</td><td>Bash</td>' in text
    assert "<img src=x" not in page.text
    assert "&lt;img src=x onerror=alert(1)&gt;" in page.text


def test_with_no_unguarded_call_the_card_shows_nothing_alarming(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    console = ConsoleProc(real_redis_url, namespace, tmp_path)
    try:
        page = httpx.get(f"{console.base}/", headers=BEARER, timeout=10)
    finally:
        console.stop()
    text = " ".join(page.text.split())
    assert (
        '<div class="card" id="unguarded-card"><h2>Unguarded tool calls</h2><p class="big">0</p>'
        in text
    )
    assert 'id="unguarded"' not in text
