"""Gemini CLI's and Codex's rows of the adapter table: the tables agree with the catalogue,
every event captured from the real binaries (``tests/fixtures/gemini_cli``,
``tests/fixtures/codex``, re-captured by ``scripts/capture_agent_cli_fixtures.py``) has a
route and maps onto the bus event, and each answer renders as that CLI's exact output."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from hookbus.bus.kinds import DEFAULT_CATALOGUE
from hookbus.harnesses.adapters import REQUEST, Adapter, Answer, adapter
from hookbus.harnesses.codex_adapter import ADAPTER as CODEX
from hookbus.harnesses.gemini_adapter import ADAPTER as GEMINI
from hookbus.harnesses.lean import hook

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ADAPTERS = {"gemini-cli": (GEMINI, FIXTURES / "gemini_cli"), "codex": (CODEX, FIXTURES / "codex")}
CAPTURED = [
    (cli, path.stem)
    for cli, (_, folder) in ADAPTERS.items()
    for path in sorted(folder.glob("*.json"))
]
UNREACHABLE = {"HOOKBUS_REDIS_URL": "redis://127.0.0.1:1/0"}


def fixture(cli: str, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((ADAPTERS[cli][1] / f"{name}.json").read_text())
    return data


def run(cli: str, data: dict[str, Any], env: dict[str, str]) -> tuple[int, Any, str]:
    out, err = io.StringIO(), io.StringIO()
    code = hook.run(
        cli,
        ["--timeout", "5"],
        stdin=io.BytesIO(json.dumps(data).encode()),
        stdout=out,
        stderr=err,
        environ=env,
    )
    text = out.getvalue()
    return code, (json.loads(text) if text else None), err.getvalue()


def _render(harness: Adapter, name: str, **decision: Any) -> dict[str, Any] | None:
    out = harness.render(harness.route(name), Answer(decision))
    assert out.exit_code == 0
    return dict(out.stdout) if out.stdout is not None else None


def test_the_fixtures_hold_every_event_that_fires_headless() -> None:
    gemini = {p.stem for p in (FIXTURES / "gemini_cli").glob("*.json")}
    codex = {p.stem for p in (FIXTURES / "codex").glob("*.json")}
    assert gemini == set(GEMINI.routes) - {"Notification"}
    assert {"PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop", "SessionStart"} <= codex
    assert codex <= set(CODEX.routes)


@pytest.mark.parametrize("cli", sorted(ADAPTERS))
def test_every_route_names_a_catalogue_kind_and_requests_only_kinds_that_may_block(
    cli: str,
) -> None:
    harness = adapter(cli)
    assert harness is ADAPTERS[cli][0]
    for route in harness.routes.values():
        spec = DEFAULT_CATALOGUE.resolve(route.kind)
        assert spec.kind == route.kind, route
        if route.mode == REQUEST:
            assert spec.may_block, route


def test_the_guards_are_the_tool_calls() -> None:
    assert {r.name for r in GEMINI.routes.values() if r.guard} == {"BeforeTool"}
    assert {r.name for r in CODEX.routes.values() if r.guard} == {"PreToolUse", "PermissionRequest"}


def test_gemini_events_map_onto_the_catalogue() -> None:
    kinds = {name: route.kind for name, route in GEMINI.routes.items()}
    assert kinds["BeforeTool"] == "PreToolUse"
    assert kinds["AfterTool"] == "PostToolUse"
    assert kinds["BeforeModel"] == "BeforeLLMCall"
    assert kinds["BeforeAgent"] == "PromptSubmit"
    assert kinds["AfterAgent"] == "Stop"
    assert kinds["AfterModel"] == "LLMOutput"
    assert kinds["PreCompress"] == "PreCompact"
    assert kinds["BeforeToolSelection"] == "BeforeToolSelection"


def test_codex_events_of_its_own_pass_under_their_names_observe_only() -> None:
    for name in ("PreModelRequest", "PostModelRequest", "Interrupt"):
        route = CODEX.route(name)
        assert (route.kind, route.mode) == (name, "publish")
        assert DEFAULT_CATALOGUE.resolve(name).observe_only
    assert CODEX.route("UserPromptSubmit").kind == "PromptSubmit"


@pytest.mark.parametrize(("cli", "name"), CAPTURED)
def test_every_captured_event_becomes_a_bus_event_with_canonical_tool_names(
    cli: str, name: str
) -> None:
    harness = ADAPTERS[cli][0]
    data = fixture(cli, name)
    event = hook.build_event(harness, harness.route(name), data, {})
    assert event["kind"] == harness.route(name).kind
    assert event["session_id"] == data["session_id"]
    assert event["meta"]["harness"] == cli
    assert event["meta"]["event_name"] == name
    assert "cwd" not in event["payload"]
    if "tool_name" in data:
        assert event["payload"]["tool_name"] == "Bash"
        assert event["payload"]["tool_input"]["command"] == "echo captured"


@pytest.mark.parametrize(("cli", "name"), CAPTURED)
def test_every_captured_event_with_no_objection_prints_nothing(cli: str, name: str) -> None:
    harness = ADAPTERS[cli][0]
    assert _render(harness, name, outcome="allow") is None


@pytest.mark.parametrize(("cli", "name"), CAPTURED)
def test_every_captured_event_with_redis_unreachable_denies_guards_and_passes_the_rest(
    cli: str, name: str
) -> None:
    harness = ADAPTERS[cli][0]
    code, out, err = run(cli, fixture(cli, name), UNREACHABLE)
    assert code == 0
    assert "cannot reach Redis at redis://127.0.0.1:1/0" in err or out is not None
    route = harness.route(name)
    if not route.guard:
        assert out is None or set(out) == {"systemMessage"}
        return
    if cli == "gemini-cli":
        assert out["decision"] == "deny"
        assert out["reason"].startswith("hookbus is unavailable (cannot reach Redis")
    else:
        specific = out["hookSpecificOutput"]
        assert set(specific) == {"hookEventName", "permissionDecision", "permissionDecisionReason"}
        assert specific["permissionDecision"] == "deny"


def test_gemini_deny_is_decision_deny_with_the_reason_word_for_word() -> None:
    for name in ("BeforeTool", "BeforeAgent", "BeforeModel", "AfterAgent"):
        assert _render(GEMINI, name, outcome="deny", reason="no: rm -rf /") == {
            "decision": "deny",
            "reason": "no: rm -rf /",
        }


def test_gemini_never_uses_claude_codes_permission_decision_nor_ask() -> None:
    out = _render(GEMINI, "BeforeTool", outcome="ask", reason="check it")
    assert out is not None
    assert out["decision"] == "deny"  # a headless ask would hang
    assert "check it" in out["reason"]
    assert "hookSpecificOutput" not in out


def test_gemini_halt_rewrite_and_context() -> None:
    assert _render(GEMINI, "BeforeTool", outcome="halt", reason="stop all") == {
        "continue": False,
        "stopReason": "stop all",
    }
    assert _render(GEMINI, "BeforeTool", updated={"tool_input": {"command": "ls"}}) == {
        "hookSpecificOutput": {"hookEventName": "BeforeTool", "tool_input": {"command": "ls"}}
    }
    for name in ("BeforeAgent", "SessionStart", "AfterTool"):
        out = _render(GEMINI, name, outcome="allow", context=["a", "b"])
        assert out == {"hookSpecificOutput": {"hookEventName": name, "additionalContext": "a\nb"}}


def test_codex_pre_tool_use_deny_has_exactly_the_fields_codex_knows() -> None:
    assert _render(CODEX, "PreToolUse", outcome="deny", reason="no") == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "no",
        }
    }
    empty = _render(CODEX, "PreToolUse", outcome="deny")
    assert empty is not None
    assert empty["hookSpecificOutput"]["permissionDecisionReason"]  # never without a reason


def test_codex_ask_and_a_rewrite_it_cannot_apply_are_denies_that_say_why() -> None:
    ask = _render(CODEX, "PreToolUse", outcome="ask", reason="look")
    assert ask is not None
    assert "a person must confirm this call (look)" in json.dumps(ask)
    rewrite = _render(CODEX, "PreToolUse", updated={"tool_input": {"command": "ls"}})
    assert rewrite is not None
    reason = rewrite["hookSpecificOutput"]["permissionDecisionReason"]
    assert reason.endswith('run this input instead: {"command": "ls"}')


def test_codex_permission_request_deny_and_a_rewrite_is_no_answer() -> None:
    assert _render(CODEX, "PermissionRequest", outcome="deny", reason="no") == {
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "deny", "message": "no"},
        }
    }
    assert _render(CODEX, "PermissionRequest", updated={"tool_input": {"command": "ls"}}) is None


def test_codex_block_stop_halt_and_context() -> None:
    for name in ("UserPromptSubmit", "Stop", "SubagentStop"):
        assert _render(CODEX, name, outcome="deny", reason="again") == {
            "decision": "block",
            "reason": "again",
        }
    assert _render(CODEX, "Stop", outcome="halt", reason="enough") == {
        "continue": False,
        "stopReason": "enough",
    }
    for name in ("SessionStart", "UserPromptSubmit"):
        out = _render(CODEX, name, outcome="allow", context=["ctx"])
        assert out == {"hookSpecificOutput": {"hookEventName": name, "additionalContext": "ctx"}}


@pytest.mark.parametrize("cli", sorted(ADAPTERS))
def test_a_degraded_decision_is_shown_as_a_system_message(cli: str) -> None:
    harness = ADAPTERS[cli][0]
    guard = "BeforeTool" if cli == "gemini-cli" else "PreToolUse"
    out = _render(harness, guard, outcome="allow", degraded=True, reason="policy allowed")
    assert out == {"systemMessage": "hookbus: policy allowed"}


def test_codex_prompt_submit_with_redis_unreachable_prints_only_json() -> None:
    # plain stdout on UserPromptSubmit would become model context
    code, out, _ = run("codex", fixture("codex", "UserPromptSubmit"), UNREACHABLE)
    assert code == 0
    assert set(out) == {"systemMessage"}


def test_gemini_after_agent_with_stop_hook_active_exits_at_once() -> None:
    data = dict(fixture("gemini-cli", "AfterAgent"), stop_hook_active=True)
    assert run("gemini-cli", data, UNREACHABLE) == (0, None, "")
