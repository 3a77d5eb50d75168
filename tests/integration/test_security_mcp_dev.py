"""End to end: an MCP client writes a guard hook with ``hook_write``, publishes it with
``hooks_reload`` on a running ``hookbus dev``, and the next request is decided by it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from hookbus import HookBus
from hookbus.authoring.pending import approve_pending
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Decision, Event
from tests.mcp_helpers import GUARD, call, mcp_session

START_TIMEOUT_S = 40.0
SWITCH_TIMEOUT_S = 20.0
DEADLINE_MS = 3_000


@pytest.fixture
def dev(
    tmp_path: Path, real_redis: redis.Redis, real_redis_url: str, namespace: str
) -> Iterator[Path]:
    """A running ``hookbus dev`` on the real server and a test namespace; yields its hooks
    folder (empty at start) and stops it (SIGTERM, then SIGKILL) afterwards."""
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env.update(HOOKBUS_REDIS_URL=real_redis_url, HOOKBUS_NAMESPACE=namespace, COLUMNS="200")
    log = (tmp_path / "dev.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "hookbus", "dev", "--hooks-dir", str(hooks)],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while "Press Ctrl-C" not in (tmp_path / "dev.log").read_text():
            assert proc.poll() is None, (tmp_path / "dev.log").read_text()
            assert time.monotonic() < deadline, "hookbus dev did not start"
            time.sleep(0.1)
        yield hooks
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        log.close()


def ask(bus: HookBus, command: str, agent: str = "claude-1") -> Decision:
    event = Event(
        kind="PreToolUse",
        payload={"tool_name": "Bash", "tool_input": {"command": command}},
        agent_id=agent,
    )
    return bus.request(event, deadline_ms=DEADLINE_MS)


async def test_hook_write_then_hooks_reload_on_hookbus_dev_decides_the_next_request(
    dev: Path, tmp_path: Path, real_redis_url: str, namespace: str
) -> None:
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    with HookBus(settings) as bus:
        deadline = time.monotonic() + START_TIMEOUT_S
        before = ask(bus, "rm -rf build")
        while before.degraded and time.monotonic() < deadline:  # the chain worker is starting
            time.sleep(0.2)
            before = ask(bus, "rm -rf build")
        assert before.outcome == "allow" and not before.degraded, before

        env = {
            "HOOKBUS_REDIS_URL": real_redis_url,
            "HOOKBUS_NAMESPACE": namespace,
            "HOOKBUS_AGENT_ID": "claude-1",  # the agent whose sessions its hooks act on
        }
        async with mcp_session(dev, tmp_path, **env) as session:
            data, error = await call(session, "hook_write", **GUARD)
            assert not error and data["pending"], data
            # an agent's reload never publishes a hook no operator approved
            data, error = await call(session, "hooks_reload")
            assert not error and data["hooks"] == [], data
            assert ask(bus, "rm -rf build").outcome == "allow"
            approve_pending(dev, GUARD["name"])  # the operator's `hookbus hooks approve`
            data, error = await call(session, "hooks_reload")
            assert not error and data["hooks"] == [GUARD["name"]], data
            version = data["version"]

        deadline = time.monotonic() + SWITCH_TIMEOUT_S
        after = ask(bus, "rm -rf build")
        while after.bundle_version != version and time.monotonic() < deadline:
            time.sleep(0.1)
            after = ask(bus, "rm -rf build")
        assert after.bundle_version == version, after
        assert (after.outcome, after.reason) == ("deny", "no rm -rf please")
        assert ask(bus, "ls -la").outcome == "allow"
        assert ask(bus, "rm -rf build", agent="claude-2").outcome == "allow"  # its author's only
