"""Every "unavailable" message and degraded reason names the Redis URL it used, password
masked, and the namespace: what a user talking to the wrong Redis needs to see."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hookbus import Event, HookBus
from hookbus.errors import RedisUnavailable

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
