"""``hookbus claude-code hook`` as Claude Code runs it: a process per event, JSON on stdin,
against a real chain worker on the real Redis.

The worker serves static hooks whose answer the event itself selects (a marker such as
``HOOKBUS_DENY`` anywhere in its payload; with ``HOOKBUS_FOR_<kind>`` also in it, only for
that kind), so one worker covers every event and every answer form. Each event of
``tests/fixtures/claude_code`` goes through the real command.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import redis

from hookbus.bus import keys
from hookbus.bus.keys import Keys
from hookbus.bus.wire import Event, decode
from hookbus.harnesses.claude_adapter import ADAPTER
from tests.blocking_helpers import wait_for
from tests.claude_code_helpers import (
    FIXTURES,
    fixture,
    run_hook,
    start_worker,
    stop_worker,
)

EVENTS = sorted(p.stem for p in FIXTURES.glob("*.json"))


def freeze(proc: subprocess.Popen[bytes]) -> None:
    """Stop the worker and every process it forked (the chain may serve from a child)."""
    os.killpg(proc.pid, signal.SIGSTOP)


def _last_event(client: redis.Redis, ns: str) -> Event:
    entries = client.xrevrange(keys.events(ns), count=1)
    assert entries, "nothing reached the event stream"
    return decode(entries[0][1][b"e"], Event)


@pytest.mark.parametrize("name", EVENTS)
def test_every_event_with_no_objection_prints_nothing_and_exits_zero(
    fleet: tuple[str, str], name: str
) -> None:
    url, ns = fleet
    client = redis.Redis.from_url(url, protocol=2)
    data = fixture(name)
    before = client.xlen(keys.events(ns))
    decisions_before = client.xlen(keys.decisions(ns))
    code, out, err = run_hook(data, url, ns)
    assert (code, out) == (0, None), err
    route = ADAPTER.route(name)
    if route.mode == "publish":
        assert client.xlen(keys.events(ns)) == before + 1
        event = _last_event(client, ns)
        assert event.kind == route.kind
        assert event.session_id == data["session_id"]
        assert event.meta["event_name"] == name
    else:
        assert client.xlen(keys.decisions(ns)) == decisions_before + 1
    client.close()


def test_a_post_tool_use_reaches_the_event_stream_with_its_tool_response(
    fleet: tuple[str, str],
) -> None:
    url, ns = fleet
    client = redis.Redis.from_url(url, protocol=2)
    assert run_hook(fixture("PostToolUse"), url, ns)[:2] == (0, None)
    event = _last_event(client, ns)
    assert event.kind == "PostToolUse"
    assert event.payload["tool_response"]["stdout"] == "README.md\nsrc\n"
    client.close()


def test_pre_tool_use_deny_reaches_claude_code_word_for_word(fleet: tuple[str, str]) -> None:
    url, ns = fleet
    data = fixture("PreToolUse", tool_input={"command": "echo HOOKBUS_DENY"})
    code, out, _ = run_hook(data, url, ns)
    assert code == 0
    assert out == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": f"denied by the fleet: PreToolUse of {data['session_id']}",
        }
    }


def test_a_skills_shell_command_is_denied_by_the_fleet_as_a_bash_call(
    fleet: tuple[str, str],
) -> None:
    url, ns = fleet
    data = fixture("PreSkillShellCommand", tool_input={"command": "echo HOOKBUS_DENY"})
    code, out, _ = run_hook(data, url, ns)
    assert code == 0
    assert out == {
        "hookSpecificOutput": {
            "hookEventName": "PreSkillShellCommand",
            "permissionDecision": "deny",
            "permissionDecisionReason": f"denied by the fleet: PreToolUse of {data['session_id']}",
        }
    }


def test_pre_tool_use_ask_halt_rewrite_and_context(fleet: tuple[str, str]) -> None:
    url, ns = fleet
    sid = fixture("PreToolUse")["session_id"]
    _, ask, _ = run_hook(fixture("PreToolUse", tool_input={"command": "HOOKBUS_ASK"}), url, ns)
    assert ask["hookSpecificOutput"]["permissionDecision"] == "ask"
    assert ask["hookSpecificOutput"]["permissionDecisionReason"] == (
        f"a person must look: PreToolUse of {sid}"
    )
    _, halt, _ = run_hook(fixture("PreToolUse", tool_input={"command": "HOOKBUS_HALT"}), url, ns)
    assert halt["continue"] is False
    assert halt["stopReason"] == f"halted: PreToolUse of {sid}"
    _, new, _ = run_hook(fixture("PreToolUse", tool_input={"command": "HOOKBUS_REWRITE"}), url, ns)
    assert new["hookSpecificOutput"]["updatedInput"] == {"command": "ls -la"}
    _, ctx, _ = run_hook(fixture("PreToolUse", tool_input={"command": "HOOKBUS_CONTEXT"}), url, ns)
    assert ctx == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "additionalContext": f"context from the fleet for PreToolUse of {sid}",
        }
    }


def test_permission_request_is_answered_with_decision_behavior(fleet: tuple[str, str]) -> None:
    url, ns = fleet
    data = fixture("PermissionRequest", tool_input={"command": "HOOKBUS_DENY"})
    code, out, _ = run_hook(data, url, ns)
    assert code == 0
    assert out["hookSpecificOutput"]["decision"] == {
        "behavior": "deny",
        "message": f"denied by the fleet: PermissionRequest of {data['session_id']}",
    }


@pytest.mark.parametrize(
    ("name", "field"),
    [
        ("UserPromptSubmit", "prompt"),
        ("Stop", "last_assistant_message"),
        ("SubagentStop", "last_assistant_message"),
        ("PreCompact", "custom_instructions"),
        ("PreModelSwitch", "to_model"),
    ],
)
def test_blockable_events_are_blocked_with_the_fleet_reason(
    fleet: tuple[str, str], name: str, field: str
) -> None:
    url, ns = fleet
    data = fixture(name, **{field: "HOOKBUS_DENY"})
    kind = ADAPTER.route(name).kind
    assert run_hook(data, url, ns)[:2] == (
        0,
        {"decision": "block", "reason": f"denied by the fleet: {kind} of {data['session_id']}"},
    )


def test_session_start_context_is_added(fleet: tuple[str, str]) -> None:
    url, ns = fleet
    data = fixture("SessionStart", source="HOOKBUS_CONTEXT")
    _, out, _ = run_hook(data, url, ns)
    assert out["hookSpecificOutput"]["additionalContext"] == (
        f"context from the fleet for SessionStart of {data['session_id']}"
    )


def test_a_guard_without_a_reply_by_its_deadline_is_denied_and_the_user_told(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    # a worker that heartbeats, then freezes: its heartbeat stays fresh, no reply comes
    proc = start_worker(real_redis_url, namespace)
    try:
        wait_for(lambda: real_redis.hlen(keys.workers(namespace)) > 0, what="a heartbeat")
        freeze(proc)
        code, out, _ = run_hook(fixture("PreToolUse"), real_redis_url, namespace)
        stop_code, stop_out, stop_err = run_hook(fixture("Stop"), real_redis_url, namespace)
    finally:
        stop_worker(proc)
    assert code == 0
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
    where = f"namespace '{namespace}' at {real_redis_url}"
    assert out["hookSpecificOutput"]["permissionDecisionReason"] == (
        f"hookbus is unavailable (no chain worker answered within 250 ms ({where})); "
        "blocked because this hook fails closed"
    )
    assert out["systemMessage"] == f"hookbus: no chain worker answered within 250 ms ({where})"
    # a Stop is no guard: the agent may stop, and the user is told why nothing answered
    assert (stop_code, stop_out) == (
        0,
        {
            "systemMessage": (
                f"hookbus: no chain worker answered within 250 ms ({where}); Stop passes"
            )
        },
    )
    assert "250 ms" in stop_err


@pytest.mark.timing  # the worker's answer must beat the 250 ms deadline: not under xdist load
def test_a_hook_that_overruns_is_judged_by_its_on_error_in_the_worker(
    fleet: tuple[str, str],
) -> None:
    url, ns = fleet
    # the worker gives the hook the time left, then applies its on_error (allow); the decision
    # is degraded, which Claude Code's user sees as a systemMessage naming the hook
    code, out, _ = run_hook(fixture("Stop", last_assistant_message="HOOKBUS_SLEEP"), url, ns)
    assert code == 0
    assert out is not None and set(out) == {"systemMessage"}
    assert "'scripted' timed out" in out["systemMessage"]


@pytest.mark.timing  # the capped run must end within 1 s, its interpreter's start included
def test_the_deadline_follows_the_config_and_the_entry_timeout(
    fleet: tuple[str, str], tmp_path: Path
) -> None:
    url, ns = fleet
    (tmp_path / "hookbus.toml").write_text("[deadlines]\nPreToolUse = 5000\n")
    env_config = str(tmp_path / "hookbus.toml")
    data = fixture("PreToolUse", tool_input={"command": "HOOKBUS_SLEEP HOOKBUS_DENY"})
    os.environ["HOOKBUS_CONFIG"] = env_config
    try:
        _, waited, _ = run_hook(data, url, ns)
        started = time.monotonic()
        _, capped, _ = run_hook(data, url, ns, "--timeout", "1")
        capped_s = time.monotonic() - started
    finally:
        del os.environ["HOOKBUS_CONFIG"]
    # 5 s configured: the 1.5 s hook's deny arrives
    assert waited["hookSpecificOutput"]["permissionDecisionReason"].startswith(
        "denied by the fleet"
    )
    # an entry timeout of 1 s leaves 500 ms: the answer comes before Claude Code would kill
    # the hook, and it is not the 1.5 s hook's deny (the worker's on_error or our deadline)
    assert capped_s < 1.0
    assert "denied by the fleet" not in json.dumps(capped)
    if capped is not None and "hookSpecificOutput" in capped:
        assert "500 ms" in capped["hookSpecificOutput"]["permissionDecisionReason"]


@pytest.mark.parametrize(
    "name", ["PreToolUse", "PreSkillShellCommand", "PermissionRequest", "PreModelSwitch"]
)
def test_guards_deny_when_redis_is_unreachable(name: str) -> None:
    code, out, _ = run_hook(fixture(name), "redis://127.0.0.1:1/0", "nowhere")
    assert code == 0
    text = json.dumps(out)
    assert "hookbus is unavailable (cannot reach Redis at redis://127.0.0.1:1/0" in text


@pytest.mark.parametrize("name", ["Stop", "UserPromptSubmit", "PostToolUse", "SessionEnd"])
def test_everything_else_exits_zero_when_redis_is_unreachable(name: str) -> None:
    code, out, err = run_hook(fixture(name), "redis://127.0.0.1:1/0", "nowhere")
    assert code == 0
    assert "cannot reach Redis" in err
    if ADAPTER.route(name).mode == "request":
        assert out["systemMessage"].startswith("hookbus: cannot reach Redis")
        assert set(out) == {"systemMessage"}
    else:
        assert out is None


def test_a_guard_is_denied_when_no_chain_worker_is_alive(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    code, out, _ = run_hook(fixture("PreToolUse"), real_redis_url, namespace)
    assert code == 0
    reason = out["hookSpecificOutput"]["permissionDecisionReason"]
    assert reason == (
        "hookbus is unavailable (no chain worker alive (no heartbeat in namespace "
        f"'{namespace}' at {real_redis_url})); blocked because this hook fails closed"
    )
    # nothing was left in the request stream for a worker that starts later
    assert real_redis.xlen(Keys.for_namespace(namespace).requests) == 0


def test_stop_hook_active_exits_at_once_without_a_request(fleet: tuple[str, str]) -> None:
    url, ns = fleet
    client = redis.Redis.from_url(url, protocol=2)
    before = client.xlen(keys.decisions(ns)), client.xlen(keys.events(ns))
    data = fixture("Stop", stop_hook_active=True, last_assistant_message="HOOKBUS_DENY")
    assert run_hook(data, url, ns) == (0, None, "")
    assert (client.xlen(keys.decisions(ns)), client.xlen(keys.events(ns))) == before
    client.close()


def test_inside_an_unknown_tmux_the_event_goes_its_usual_way(
    fleet: tuple[str, str], tmp_path: Path
) -> None:
    url, ns = fleet
    client = redis.Redis.from_url(url, protocol=2)
    before = client.xlen(keys.events(ns))
    # $TMUX names a server that is not there: no managed session, nothing captured
    os.environ["TMUX"] = f"{tmp_path}/no-such-tmux-socket,1,0"
    try:
        deny = run_hook(fixture("Stop", last_assistant_message="HOOKBUS_DENY"), url, ns)
        published = run_hook(fixture("Notification"), url, ns)
    finally:
        del os.environ["TMUX"]
    assert deny[1]["decision"] == "block"
    assert published[:2] == (0, None)
    event = _last_event(client, ns)
    assert client.xlen(keys.events(ns)) == before + 1
    assert event.kind == "Notification"
    assert "supervision" not in event.payload
    client.close()
