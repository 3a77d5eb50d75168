"""What an agent reads from the gateway when the fleet cannot answer says why, never where
the fleet's Redis is: no host, port or Redis user in the deny (an agent holds a gateway
token, and learning the address and user to attack is the first step). The full text stays
in the gateway's log."""

from __future__ import annotations

import json
import logging

import pytest
from starlette.testclient import TestClient

from hookbus.bus.settings.loader import Settings
from hookbus.harnesses.gateway import create_app

#: A Redis nobody answers on, with a user and a password, on a port of its own.
URL = "redis://hookbus-producer:s3cret@127.0.0.1:1/0"
SECRETS = ("127.0.0.1", "hookbus-producer", "s3cret", ":1/0", "('127.0.0.1', 1)")
EVENT = {
    "hook_event_name": "PreToolUse",
    "session_id": "s1",
    "tool_name": "Bash",
    "tool_input": {"command": "ls"},
}


def _seen_by_the_agent(out: dict[str, object]) -> str:
    return json.dumps(out)


def test_the_gateways_fail_closed_deny_names_no_redis_host_port_or_user(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = create_app(Settings(redis_url=URL, namespace="hide-redis"))
    with caplog.at_level(logging.INFO), TestClient(app) as client:
        out = client.post("/v1/hooks/claude-code", json=EVENT).json()
    seen = _seen_by_the_agent(out)
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny", out
    assert "unreachable" in seen or "cannot reach" in seen  # it still says why
    for secret in SECRETS:
        assert secret not in seen, (secret, seen)
    # the operator's log keeps where it looked
    assert "127.0.0.1:1" in caplog.text and "s3cret" not in caplog.text
