"""The fleet notices a tool call no guard was asked about (a real ``hookbus dev`` fleet:
chain worker, fan-out dispatcher, RQ worker, the shipped example hooks): its post event
with no guard request before it shows in ``hookbus status`` (text and ``--json``) and is
counted; a guarded call followed by its post event never is, named by the CLI's id or,
for CLIs that send none, by its tool and input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hookbus import HookBus
from hookbus.bus.settings.loader import Settings
from tests.fanout_helpers import wait_for
from tests.unguarded_helpers import dev_fleet, fleet_env, status_json, tool_call


def test_a_post_event_with_no_guard_request_shows_in_status_and_is_counted(
    real_redis_url: str, namespace: str, tmp_path: Path
) -> None:
    with (
        dev_fleet(real_redis_url, namespace, tmp_path),
        HookBus(Settings(redis_url=real_redis_url, namespace=namespace)) as bus,
    ):
        bus.publish(
            tool_call("PostToolUse", "ls", call_id="toolu_never_asked", agent="a7", session="s7")
        )
        found: list[dict[str, object]] = []

        def listed() -> bool:
            found[:] = status_json(real_redis_url, namespace, tmp_path)["unguarded"]
            return bool(found)

        wait_for(listed, 20, "the unguarded call in status --json")
        [call] = found
        assert (call["agent"], call["session"], call["tool"], call["cli"]) == (
            "a7",
            "s7",
            "Bash",
            "claude-code",
        )
        data = status_json(real_redis_url, namespace, tmp_path)
        assert data["unguarded_counts"] == [{"agent": "a7", "cli": "claude-code", "count": 1}]
        text = subprocess.run(
            [sys.executable, "-m", "hookbus", "status"],
            cwd=tmp_path,
            env=fleet_env(real_redis_url, namespace),
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert "UNGUARDED: agent a7 (claude-code) ran Bash in session s7" in text.stdout


def test_a_guarded_call_followed_by_its_post_event_is_never_counted(
    real_redis_url: str, namespace: str, tmp_path: Path
) -> None:
    with (
        dev_fleet(real_redis_url, namespace, tmp_path),
        HookBus(Settings(redis_url=real_redis_url, namespace=namespace)) as bus,
    ):
        guarded = [
            tool_call("PreToolUse", "ls -la", call_id="toolu_1"),
            # Copilot CLI and Gemini CLI send no id: the call is named by its tool and input
            tool_call("PreToolUse", "git status", harness="copilot"),
            tool_call("PreToolUse", "make test", session="s2", harness="gemini-cli"),
        ]
        for request in guarded:
            decision = bus.request(request, deadline_ms=5_000)
            assert decision.outcome == "allow" and not decision.degraded, decision
        for request in guarded:
            post = tool_call(
                "PostToolUse",
                request.payload["tool_input"]["command"],
                call_id=request.payload.get("tool_use_id"),
                session=request.session_id or "",
                harness=request.meta["harness"],
            )
            bus.publish(post)
        # the same command in another session, never asked about: the sentinel, looked up
        # after the guarded ones (one dispatcher reads the one partition in order)
        bus.publish(tool_call("PostToolUse", "git status", session="s3", harness="copilot"))

        def listed() -> bool:
            return bool(status_json(real_redis_url, namespace, tmp_path)["unguarded"])

        wait_for(listed, 20, "the sentinel in status --json")
        data = status_json(real_redis_url, namespace, tmp_path)
        assert [(c["session"], c["cli"]) for c in data["unguarded"]] == [("s3", "copilot")]
        assert data["unguarded_counts"] == [{"agent": "a1", "cli": "copilot", "count": 1}]


def test_with_then_halt_an_unguarded_call_halts_its_session_and_no_other(
    real_redis_url: str, namespace: str, tmp_path: Path
) -> None:
    fleet = dev_fleet(real_redis_url, namespace, tmp_path, HOOKBUS_UNGUARDED__THEN="halt")
    with fleet, HookBus(Settings(redis_url=real_redis_url, namespace=namespace)) as bus:
        assert bus.request(tool_call("PreToolUse", "ls", agent="a7", session="s7")).outcome == (
            "allow"
        )
        for n in range(3):  # three unguarded calls of one session: one halt
            bus.publish(tool_call("PostToolUse", f"ls {n}", agent="a7", session="s7"))
        bus.publish(tool_call("PostToolUse", "ls", session="s9", agent=""))  # no agent id

        def refused() -> bool:
            decision = bus.request(tool_call("PreToolUse", "ls", agent="a7", session="s7"))
            return decision.outcome != "allow"

        wait_for(refused, 20, "the session's next tool call refused")
        decision = bus.request(tool_call("PreToolUse", "ls", agent="a7", session="s7"))
        assert decision.outcome in ("deny", "halt") and "no guard asked" in (decision.reason or "")
        # the same session id from another agent, and the agent's other session, run on
        for agent, session in (("a8", "s7"), ("a7", "s8"), ("", "s9")):
            other = bus.request(tool_call("PreToolUse", "ls", agent=agent, session=session))
            assert other.outcome == "allow", (agent, session, other)
        notices = subprocess.run(
            [sys.executable, "-m", "hookbus", "--json", "notices", "list"],
            cwd=tmp_path,
            env=fleet_env(real_redis_url, namespace),
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert notices.returncode == 0, notices.stderr
        made = [n for n in json.loads(notices.stdout) if n["created_by"] == "fleet:unguarded"]
        assert [(n["agent"], n["session"], n["blocking"]) for n in made] == [("a7", "s7", True)]
