"""Claude Code's row of the adapter table: the table agrees with the catalogue, every event
of the fixtures has a route, and each answer renders as Claude Code's exact output."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from hookbus.bus.kinds import DEFAULT_CATALOGUE
from hookbus.harnesses.adapters import REQUEST, Answer, adapter
from hookbus.harnesses.claude_adapter import ADAPTER, ROUTES, render
from hookbus.harnesses.lean import hook
from hookbus.harnesses.lean.config import LeanConfig

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "claude_code"
EVENTS = sorted(p.stem for p in FIXTURES.glob("*.json"))
KNOWN = [name for name in EVENTS if name in ADAPTER.routes]


def fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return data


def test_every_route_names_a_catalogue_kind_and_requests_only_kinds_that_may_block() -> None:
    for route in ROUTES:
        spec = DEFAULT_CATALOGUE.resolve(route.kind)
        assert spec.kind == route.kind, route
        if route.mode == REQUEST:
            assert spec.may_block, route


def test_the_guards_are_exactly_the_calls_that_must_fail_closed() -> None:
    guards = {route.name for route in ROUTES if route.guard}
    assert guards == {"PreToolUse", "PreSkillShellCommand", "PermissionRequest", "PreModelSwitch"}


def test_the_installer_never_registers_worktree_create_or_message_display() -> None:
    skipped = {route.name for route in ROUTES if not route.install}
    assert skipped == {"WorktreeCreate", "MessageDisplay"}


def test_every_event_of_the_fixtures_but_the_future_one_has_a_route() -> None:
    assert set(EVENTS) - set(ADAPTER.routes) == {"FutureEventFromANewerRelease"}
    assert len(ADAPTER.routes) == 34


def test_an_unknown_event_passes_under_its_own_name_observe_only() -> None:
    route = ADAPTER.route("SomethingNew")
    assert (route.kind, route.mode, route.guard, route.install) == (
        "SomethingNew",
        "publish",
        False,
        False,
    )


def test_the_table_finds_the_adapter_by_cli_name_and_names_the_known_ones() -> None:
    assert adapter("claude-code") is ADAPTER
    with pytest.raises(KeyError, match="claude-code"):
        adapter("no-such-cli")


@pytest.mark.parametrize("name", KNOWN)
def test_a_chain_with_no_objection_prints_nothing(name: str) -> None:
    out = render(ADAPTER.route(name), Answer({"outcome": "allow"}))
    assert (out.stdout, out.exit_code) == (None, 0)


def _render(name: str, **decision: Any) -> dict[str, Any] | None:
    out = render(ADAPTER.route(name), Answer(decision))
    assert out.exit_code == 0
    return dict(out.stdout) if out.stdout is not None else None


def test_pre_tool_use_deny_is_a_permission_decision_with_the_reason_word_for_word() -> None:
    assert _render("PreToolUse", outcome="deny", reason="refused: rm -rf ~") == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "refused: rm -rf ~",
        }
    }


def test_pre_tool_use_ask_asks_the_user_with_the_reason() -> None:
    assert _render("PreToolUse", outcome="ask", reason="check with a person") == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "ask",
            "permissionDecisionReason": "check with a person",
        }
    }


def test_pre_tool_use_rewritten_input_and_context() -> None:
    out = _render(
        "PreToolUse",
        outcome="allow",
        updated={"tool_input": {"command": "ls -la"}},
        context=["saw ls", "second"],
    )
    assert out is not None
    specific = out["hookSpecificOutput"]
    assert specific["permissionDecision"] == "allow"
    assert specific["updatedInput"] == {"command": "ls -la"}
    assert specific["additionalContext"] == "saw ls\nsecond"


def test_context_alone_does_not_approve_a_tool_call() -> None:
    out = _render("PreToolUse", outcome="allow", context=["note"])
    assert out == {
        "hookSpecificOutput": {"hookEventName": "PreToolUse", "additionalContext": "note"}
    }


def test_halt_stops_the_session_and_denies_the_call() -> None:
    out = _render("PreToolUse", outcome="halt", reason="stop everything")
    assert out is not None
    assert out["continue"] is False
    assert out["stopReason"] == "stop everything"
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_permission_request_deny_and_allow_with_new_input() -> None:
    assert _render("PermissionRequest", outcome="deny", reason="no") == {
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "deny", "message": "no"},
        }
    }
    allowed = _render("PermissionRequest", outcome="allow", updated={"tool_input": {"a": 1}})
    assert allowed == {
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "allow", "updatedInput": {"a": 1}},
        }
    }


def test_permission_request_halt_interrupts() -> None:
    out = _render("PermissionRequest", outcome="halt", reason="stop")
    assert out is not None
    assert out["hookSpecificOutput"]["decision"] == {
        "behavior": "deny",
        "message": "stop",
        "interrupt": True,
    }
    assert out["continue"] is False


@pytest.mark.parametrize(
    "name", ["UserPromptSubmit", "Stop", "SubagentStop", "PreCompact", "PreModelSwitch"]
)
def test_blockable_events_use_decision_block_with_the_reason(name: str) -> None:
    assert _render(name, outcome="deny", reason="keep going: tests fail") == {
        "decision": "block",
        "reason": "keep going: tests fail",
    }


@pytest.mark.parametrize("name", ["UserPromptSubmit", "SessionStart"])
def test_prompt_and_session_start_context_is_additional_context(name: str) -> None:
    assert _render(name, outcome="allow", context=["use pnpm"]) == {
        "hookSpecificOutput": {"hookEventName": name, "additionalContext": "use pnpm"}
    }


def test_a_degraded_decision_is_shown_to_the_user_as_a_system_message() -> None:
    out = _render(
        "PreToolUse",
        outcome="deny",
        reason="no chain worker answered within 250 ms; policy deny",
        degraded=True,
    )
    assert out is not None
    assert out["systemMessage"] == "hookbus: no chain worker answered within 250 ms; policy deny"
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"


@pytest.mark.parametrize("name", ["PreToolUse", "PermissionRequest", "PreModelSwitch"])
def test_guards_deny_when_the_bus_is_unavailable(name: str) -> None:
    out = render(ADAPTER.route(name), Answer(unavailable="cannot reach Redis at redis://x"))
    assert out.exit_code == 0
    text = json.dumps(out.stdout)
    assert "hookbus is unavailable (cannot reach Redis at redis://x)" in text
    assert "deny" in text or '"block"' in text


def test_a_guard_configured_to_allow_on_timeout_passes_when_the_bus_is_unavailable() -> None:
    out = render(ADAPTER.route("PreToolUse"), Answer(unavailable="down", policy="allow"))
    assert (out.stdout, out.exit_code) == ({"systemMessage": "hookbus: down; PreToolUse passes"}, 0)


NOT_GUARDS = [n for n in EVENTS if not ADAPTER.route(n).guard]


@pytest.mark.parametrize("name", NOT_GUARDS)
def test_everything_but_guards_passes_when_the_bus_is_unavailable(name: str) -> None:
    route = ADAPTER.route(name)
    out = render(route, Answer(unavailable="down"))
    assert out.exit_code == 0
    assert "down" in out.stderr
    if route.mode == REQUEST:  # an answer was expected: the user is told it did not come
        assert out.stdout == {"systemMessage": f"hookbus: down; {name} passes"}
    else:
        assert out.stdout is None


def test_build_event_maps_the_input_onto_the_bus_event() -> None:
    data = fixture("PreToolUse")
    route = ADAPTER.route("PreToolUse")
    event = hook.build_event(ADAPTER, route, data, {"HOOKBUS_AGENT_ID": "agent-a"})
    assert event["kind"] == "PreToolUse"
    assert event["session_id"] == data["session_id"]
    assert event["agent_id"] == "agent-a"
    assert event["payload"]["tool_input"] == data["tool_input"]
    assert "cwd" not in event["payload"]
    assert event["meta"]["cwd"] == data["cwd"]
    assert event["meta"]["harness"] == "claude-code"
    assert event["meta"]["event_name"] == "PreToolUse"


def test_user_prompt_submit_becomes_the_prompt_submit_kind() -> None:
    route = ADAPTER.route("UserPromptSubmit")
    event = hook.build_event(ADAPTER, route, fixture("UserPromptSubmit"), {})
    assert event["kind"] == "PromptSubmit"
    assert event["payload"]["prompt"] == "list the files in this repo"


def test_tool_aliases_map_to_canonical_names_and_keep_the_cli_name() -> None:
    data = {**fixture("PreToolUse"), "tool_name": "MultiEdit"}
    event = hook.build_event(ADAPTER, ADAPTER.route("PreToolUse"), data, {})
    assert event["payload"]["tool_name"] == "Edit"
    assert event["payload"]["harness_tool_name"] == "MultiEdit"


def _run(stdin: bytes, argv: list[str] | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = hook.run(
        "claude-code",
        argv or [],
        stdin=io.BytesIO(stdin),
        stdout=out,
        stderr=err,
        environ={"HOOKBUS_REDIS_URL": "redis://127.0.0.1:1/0"},
    )
    return code, out.getvalue(), err.getvalue()


def test_stop_hook_active_exits_zero_at_once_without_touching_redis() -> None:
    data = {**fixture("Stop"), "stop_hook_active": True}
    # the URL points at a closed port: any attempt to connect would print a reason
    assert _run(json.dumps(data).encode()) == (0, "", "")


def test_input_that_is_not_json_exits_2_with_the_reason_on_stderr_and_nothing_on_stdout() -> None:
    code, out, err = _run(b"{not json")
    assert (code, out) == (2, "")
    assert "not JSON" in err


def test_an_unknown_argument_is_refused_with_exit_2() -> None:
    code, out, err = _run(b"{}", ["--bogus"])
    assert (code, out) == (2, "")
    assert "--bogus" in err


def test_the_deadline_stays_under_the_entry_timeout() -> None:
    cfg = LeanConfig(deadlines={"PreToolUse": 30_000})
    route = ADAPTER.route("PreToolUse")
    assert hook.budget_for(cfg, route, entry_timeout_s=10) == 9_500
    assert hook.budget_for(LeanConfig(), route, entry_timeout_s=10) == 250
    assert (
        hook.budget_for(
            LeanConfig(deadlines={"UserPromptSubmit": 900}), ADAPTER.route("UserPromptSubmit"), 60
        )
        == 900
    )


def test_a_supervised_bidirectional_stop_waits_for_its_supervisor_under_the_entry_timeout() -> None:
    capture = {"reply_wanted": True, "reply_deadline_ms": 600_000}
    assert hook.supervised_route(capture, 250, entry_timeout_s=610) == ("request", 600_000)
    assert hook.supervised_route(capture, 250, entry_timeout_s=10) == ("request", 9_500)


def test_a_supervised_async_event_is_published_so_the_agent_never_waits() -> None:
    capture = {"reply_wanted": False, "reply_deadline_ms": None}
    assert hook.supervised_route(capture, 250, entry_timeout_s=10) == ("publish", 250)


def test_an_internal_error_still_denies_a_guard_and_prints_only_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(hook, "build_event", broken)
    code, out, _ = _run(json.dumps(fixture("PreToolUse")).encode())
    assert code == 0
    reason = json.loads(out)["hookSpecificOutput"]["permissionDecisionReason"]
    assert "internal error: RuntimeError('a bug')" in reason
    code, out, err = _run(json.dumps(fixture("PostToolUse")).encode())
    assert (code, out) == (0, "")
    assert "a bug" in err


def test_stdout_is_ascii_json_whatever_the_hooks_said(monkeypatch: pytest.MonkeyPatch) -> None:
    said = Answer({"outcome": "deny", "reason": "no \udc80 \u2603"})
    monkeypatch.setattr(
        hook, "answer_event", lambda harness, data, **kw: render(ADAPTER.route("Stop"), said)
    )
    code, out, _ = _run(json.dumps(fixture("Stop")).encode())
    assert code == 0
    assert out.isascii()
    assert json.loads(out)["reason"] == "no \udc80 \u2603"


def _skill_output(answer: Answer) -> Any:
    out = render(ADAPTER.route("PreSkillShellCommand"), answer).stdout
    assert out is not None
    return out


def test_a_skills_shell_command_is_guarded_as_a_bash_call() -> None:
    route = ADAPTER.route("PreSkillShellCommand")
    assert (route.kind, route.mode, route.guard) == ("PreToolUse", REQUEST, True)
    assert fixture("PreSkillShellCommand")["tool_name"] == "Bash"


def test_a_deny_of_a_skills_shell_command_is_its_permission_decision() -> None:
    out = _skill_output(Answer({"outcome": "deny", "reason": "no rm -rf"}))
    assert out["hookSpecificOutput"] == {
        "hookEventName": "PreSkillShellCommand",
        "permissionDecision": "deny",
        "permissionDecisionReason": "no rm -rf",
    }


def test_a_rewritten_skill_command_is_refused_because_claude_code_never_runs_a_rewrite() -> None:
    answer = Answer({"outcome": "allow", "updated": {"tool_input": {"command": "ls"}}})
    specific = _skill_output(answer)["hookSpecificOutput"]
    assert specific["permissionDecision"] == "deny"
    assert "cannot be rewritten" in specific["permissionDecisionReason"]


def test_a_skill_command_fails_closed_when_the_bus_cannot_answer() -> None:
    out = _skill_output(Answer(unavailable="no chain worker alive", policy="deny"))
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
