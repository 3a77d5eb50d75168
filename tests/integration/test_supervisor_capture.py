"""Capture in a real tmux pane with the registry on the real server: the probe runs *inside*
the pane (so ``$TMUX`` and ``$TMUX_PANE`` are tmux's own) through the lean RESP client."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from hookbus.supervisor.agent_registry import AgentRegistry
from hookbus.supervisor.tmux_driver import TmuxServer

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

ROOT = Path(__file__).resolve().parents[2]

PROBE = textwrap.dedent(
    """
    import json, os, sys
    from hookbus.bus.resp import RespConnection
    from hookbus.supervisor.capture import supervise_event

    kind, data, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    event = {"kind": kind, "payload": {}}
    with RespConnection(os.environ["HOOKBUS_REDIS_URL"]) as conn:
        found = supervise_event(event, data, os.environ, conn.call, os.environ["HOOKBUS_NAMESPACE"])
    open(out + ".tmp", "w").write(json.dumps(event if found is not None else None))
    os.rename(out + ".tmp", out)
    """
)

SCREEN = (
    "old output\\n" * 150
    + "Pick the next step\\n"
    + "❯ 1. Fix the failing test\\n"
    + "  2. Write the docs\\n"
    + "Enter to select · esc to cancel\\n"
    + "opus | Context: 72%% | main\\n"
)


@pytest.fixture
def server() -> Iterator[TmuxServer]:
    srv = TmuxServer(socket_name=f"hbcap-{uuid.uuid4().hex[:10]}")
    yield srv
    subprocess.run(srv.argv("kill-server"), capture_output=True, check=False)


@pytest.fixture
def registry(real_redis: redis.Redis, namespace: str) -> AgentRegistry:
    reg = AgentRegistry(real_redis, namespace)
    reg.set(
        "warden",
        [
            ("tmux_session_name", "warden-main"),
            ("openclaw_session_id", "oc-warden"),
            ("hook_mode", "bidirectional"),
            ("pane_capture_lines", "8"),
        ],
    )
    reg.set("forge", [("tmux_session_name", "forge-main"), ("openclaw_session_id", "oc-forge")])
    return reg


def probe_in_pane(
    server: TmuxServer,
    session: str,
    kind: str,
    data: dict[str, Any],
    tmp_path: Path,
    url: str,
    ns: str,
) -> Any:
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    out = tmp_path / f"{session}-{kind}.json"
    command = (
        f"printf '{SCREEN}'; "
        f"{shlex.quote(sys.executable)} {shlex.quote(str(script))} {kind} "
        f"{shlex.quote(json.dumps(data))} {shlex.quote(str(out))}; sleep 60"
    )
    server.run(
        "new-session", "-d", "-s", session, "-x", "120", "-y", "40",
        "-e", f"HOOKBUS_REDIS_URL={url}", "-e", f"HOOKBUS_NAMESPACE={ns}",
        "-e", f"PYTHONPATH={ROOT}", command,
    )  # fmt: skip
    end = time.monotonic() + 20
    while not out.exists():
        if time.monotonic() > end:
            pane = server.run("capture-pane", "-p", "-t", f"={session}:")
            raise AssertionError(f"the probe wrote nothing; the pane shows:\n{pane}")
        time.sleep(0.05)
    return json.loads(out.read_text())


def test_a_managed_sessions_stop_carries_pane_pressure_and_state(
    server: TmuxServer, registry: AgentRegistry, tmp_path: Path, real_redis_url: str, namespace: str
) -> None:
    event = probe_in_pane(server, "warden-main", "Stop", {}, tmp_path, real_redis_url, namespace)
    assert event is not None
    sup = event["payload"]["supervision"]
    assert event["agent_id"] == "warden"
    assert (sup["agent_id"], sup["tmux_session_name"], sup["openclaw_session_id"]) == (
        "warden",
        "warden-main",
        "oc-warden",
    )
    assert sup["trigger"] == "response_complete"
    assert sup["state_hint"] == "menu"
    assert sup["context_pressure"] == {"percent": 72, "level": "WARNING", "threshold": 50}
    assert sup["hook_mode"] == "bidirectional"
    assert sup["reply_wanted"] is True
    assert sup["reply_deadline_ms"] == 600_000
    # pane_capture_lines = 8: the last eight lines, the old output above them cut off
    lines = sup["pane"].splitlines()
    assert len(lines) == 8
    assert lines[-5:] == [
        "Pick the next step",
        "❯ 1. Fix the failing test",
        "  2. Write the docs",
        "Enter to select · esc to cancel",
        "opus | Context: 72% | main",
    ]


def test_an_async_agents_notification_is_captured_but_wants_no_reply(
    server: TmuxServer, registry: AgentRegistry, tmp_path: Path, real_redis_url: str, namespace: str
) -> None:
    event = probe_in_pane(
        server,
        "forge-main",
        "Notification",
        {"notification_type": "idle_prompt"},
        tmp_path,
        real_redis_url,
        namespace,
    )
    sup = event["payload"]["supervision"]
    assert (sup["agent_id"], sup["trigger"], sup["reply_wanted"]) == ("forge", "idle_prompt", False)
    assert len(sup["pane"].splitlines()) == 120  # the built-in default depth


def test_a_tmux_session_not_in_the_registry_is_not_supervised(
    server: TmuxServer, registry: AgentRegistry, tmp_path: Path, real_redis_url: str, namespace: str
) -> None:
    event = probe_in_pane(server, "stranger", "Stop", {}, tmp_path, real_redis_url, namespace)
    assert event is None


def test_stop_hook_active_is_not_supervised_even_in_a_managed_session(
    server: TmuxServer, registry: AgentRegistry, tmp_path: Path, real_redis_url: str, namespace: str
) -> None:
    data = {"stop_hook_active": True}
    event = probe_in_pane(server, "warden-main", "Stop", data, tmp_path, real_redis_url, namespace)
    assert event is None


def test_session_end_sends_identity_and_trigger_without_a_pane(
    server: TmuxServer, registry: AgentRegistry, tmp_path: Path, real_redis_url: str, namespace: str
) -> None:
    event = probe_in_pane(
        server, "warden-main", "SessionEnd", {}, tmp_path, real_redis_url, namespace
    )
    sup = event["payload"]["supervision"]
    assert (sup["trigger"], sup["pane"], sup["reply_wanted"]) == ("session_terminated", "", False)
