"""Every "unavailable" message and degraded reason names the Redis URL it used, password
masked, and the namespace: what a user talking to the wrong Redis needs to see."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hookbus import Event, HookBus
from hookbus.bus.policy import guarded
from hookbus.bus.settings.loader import Settings
from hookbus.errors import RedisUnavailable
from hookbus.harnesses.adapters import adapter
from hookbus.harnesses.gateway import Gateway

URL = "redis://someone:s3cret@127.0.0.1:1/0"
SHOWN = "redis://someone:***@127.0.0.1:1/0"


def test_the_sdk_names_the_masked_url_and_the_namespace() -> None:
    with HookBus.from_url(URL, namespace="ns-where") as bus:
        decision = bus.request(Event(kind="PreToolUse"), deadline_ms=300)
        assert decision.degraded and decision.outcome == "deny"
        assert f"namespace 'ns-where' at {SHOWN}" in (decision.reason or "")
        with pytest.raises(RedisUnavailable) as strict:
            bus.request(Event(kind="PreToolUse"), deadline_ms=300, strict=True)
        with pytest.raises(RedisUnavailable) as published:
            bus.publish(Event(kind="Stop"))
    for error in (strict.value, published.value):
        assert SHOWN in str(error) and "namespace 'ns-where'" in str(error), str(error)
        assert "s3cret" not in str(error)
    assert "s3cret" not in (decision.reason or "")


def test_the_lean_publish_names_the_masked_url_and_the_namespace(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hookbus", "--redis-url", URL, "-n", "ns-lean", "publish", "Stop"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 69
    assert f"cannot reach Redis at {SHOWN} (namespace 'ns-lean')" in done.stderr
    assert "s3cret" not in done.stderr


def test_a_guarded_event_too_large_to_send_names_where_it_was_not_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # the policy cache: the test's own
    with HookBus.from_url(URL, namespace="ns-big") as bus:
        bus.fail_policy.update(guarded.encode("v1", ["PreToolUse"]))
        big = Event(kind="PreToolUse", payload={"blob": "x" * (2 * 1024 * 1024)})
        decision = bus.request(big, deadline_ms=300)
    assert decision.degraded and decision.outcome == "deny"
    assert f"namespace 'ns-big' at {SHOWN}" in (decision.reason or ""), decision.reason


def test_the_gateway_s_own_unanswered_reasons_name_the_namespace_and_log_the_url(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gateway = Gateway(Settings(redis_url=URL, namespace="ns-gw"), None, None)
    harness = adapter("claude-code")
    with caplog.at_level(logging.INFO):
        out = gateway.unanswered(harness, harness.route("PreToolUse"), "no answer within 90 ms")
    assert out.stdout is not None
    reason = out.stdout["hookSpecificOutput"]["permissionDecisionReason"]
    assert "no answer within 90 ms" in reason
    # the agent holds a token, not a Redis user: the URL is for the operator's log only
    assert "namespace 'ns-gw' at [address withheld]" in reason, reason
    assert "127.0.0.1" not in reason and "someone" not in reason and "s3cret" not in reason
    assert f"namespace 'ns-gw' at {SHOWN}" in caplog.text and "s3cret" not in caplog.text


@pytest.mark.parametrize("command", [["status"], ["dlq", "list"], ["tail", "--decisions"]])
def test_a_command_that_cannot_reach_redis_names_the_url_and_the_namespace(
    command: list[str], tmp_path: Path
) -> None:
    env = {**os.environ, "HOOKBUS_REDIS_URL": URL, "HOOKBUS_NAMESPACE": "ns-cli"}
    done = subprocess.run(
        [sys.executable, "-m", "hookbus", *command],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    assert done.returncode == 69, done.stderr
    assert "namespace 'ns-cli'" in done.stderr and "127.0.0.1:1" in done.stderr, done.stderr
    assert "s3cret" not in done.stderr
