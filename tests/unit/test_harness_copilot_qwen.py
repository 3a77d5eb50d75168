"""GitHub Copilot CLI's and Qwen Code's rows of the adapter table: the rows agree with the
catalogue, every event captured from the real binaries (``tests/fixtures/copilot``,
``tests/fixtures/qwen_code``, re-captured by ``scripts/capture_agent_cli_fixtures.py``) maps
onto the bus event with canonical tool names, and each answer renders as that CLI's exact
output (the forms tried against the binaries)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from hookbus.bus.kinds import DEFAULT_CATALOGUE
from hookbus.harnesses.adapters import REQUEST, Adapter, Answer, adapter
from hookbus.harnesses.copilot_adapter import ADAPTER as COPILOT
from hookbus.harnesses.copilot_adapter import normalize
from hookbus.harnesses.lean import hook
from hookbus.harnesses.qwen_adapter import ADAPTER as QWEN

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ADAPTERS = {"copilot": (COPILOT, FIXTURES / "copilot"), "qwen-code": (QWEN, FIXTURES / "qwen_code")}
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


def test_the_fixtures_hold_the_events_a_one_call_session_raises() -> None:
    copilot = {p.stem for p in (FIXTURES / "copilot").glob("*.json")}
    qwen = {p.stem for p in (FIXTURES / "qwen_code").glob("*.json")}
    installed = {n for n, r in COPILOT.routes.items() if r.install}
    assert copilot == installed
    assert {"PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop", "SessionStart"} <= qwen
    assert qwen <= set(QWEN.routes)


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
    for harness in (COPILOT, QWEN):
        guards = {r.name for r in harness.routes.values() if r.guard}
        assert guards == {"PreToolUse", "PermissionRequest"}


@pytest.mark.parametrize(("cli", "name"), CAPTURED)
def test_every_captured_event_becomes_a_bus_event_with_canonical_tool_names(
    cli: str, name: str
) -> None:
    harness = ADAPTERS[cli][0]
    data = fixture(cli, name)
    if harness.normalize is not None:
        data = harness.normalize(dict(data))
    assert data["hook_event_name"] == name
    event = hook.build_event(harness, harness.route(name), data, {})
    assert event["kind"] == harness.route(name).kind
    assert event["session_id"] == data["session_id"]
    assert event["meta"]["harness"] == cli
    assert event["meta"]["event_name"] == name
    assert "cwd" not in event["payload"]
    if "tool_name" in data:
        assert event["payload"]["tool_name"] == "Bash"
        assert event["payload"]["tool_input"]["command"] == "echo captured"


def test_copilots_own_permission_request_shape_is_normalised() -> None:
    raw = fixture("copilot", "PermissionRequest")
    assert "hook_event_name" not in raw and raw["toolName"] == "bash"
    event = hook.build_event(COPILOT, COPILOT.route("PermissionRequest"), normalize(dict(raw)), {})
    assert event["kind"] == "PermissionRequest"
    assert event["session_id"] == raw["sessionId"]
    assert event["payload"]["tool_name"] == "Bash"
    assert event["payload"]["harness_tool_name"] == "bash"
    assert event["payload"]["tool_input"] == {"command": "echo captured"}


def test_a_copilot_subagents_event_is_filed_under_its_parents_session() -> None:
    data = normalize(
        {
            "sessionId": "child-1",
            "parentAgentId": "session-9",
            "hookName": "preToolUse",
            "toolName": "bash",
            "toolArgs": {"command": "ls"},
        }
    )
    assert data["hook_event_name"] == "PreToolUse"
    assert (data["session_id"], data["agent_id"]) == ("session-9", "child-1")
    event = hook.build_event(COPILOT, COPILOT.route("PreToolUse"), data, {})
    assert (event["session_id"], event["agent_id"]) == ("session-9", "child-1")
    assert event["payload"]["tool_input"] == {"command": "ls"}


@pytest.mark.parametrize(("cli", "name"), CAPTURED)
def test_every_captured_event_with_no_objection_prints_nothing(cli: str, name: str) -> None:
    assert _render(ADAPTERS[cli][0], name, outcome="allow") is None


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
    reason = json.dumps(out)
    assert "hookbus is unavailable (cannot reach Redis" in reason
    if (cli, name) == ("copilot", "PreToolUse"):
        assert out["permissionDecision"] == "deny"
    elif (cli, name) == ("copilot", "PermissionRequest"):
        assert out["behavior"] == "deny"
    else:
        assert out["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_copilot_denies_in_its_own_forms() -> None:
    assert _render(COPILOT, "PreToolUse", outcome="deny", reason="no") == {
        "permissionDecision": "deny",
        "permissionDecisionReason": "no",
    }
    assert _render(COPILOT, "PermissionRequest", outcome="deny", reason="no") == {
        "behavior": "deny",
        "message": "no",
    }
    for name in ("UserPromptSubmit", "Stop"):
        assert _render(COPILOT, name, outcome="deny", reason="no") == {
            "decision": "block",
            "reason": "no",
        }


def test_copilot_ask_and_a_rewrite_are_denies_that_say_why() -> None:
    asked = _render(COPILOT, "PreToolUse", outcome="ask", reason="prod")
    assert asked is not None and asked["permissionDecision"] == "deny"
    assert "a person must confirm this call (prod)" in asked["permissionDecisionReason"]
    rewritten = _render(
        COPILOT, "PreToolUse", outcome="allow", updated={"tool_input": {"command": "ls"}}
    )
    assert rewritten is not None and '{"command": "ls"}' in rewritten["permissionDecisionReason"]


def test_copilot_halt_context_and_degraded() -> None:
    halted = _render(COPILOT, "PreToolUse", outcome="halt", reason="stop all")
    assert halted is not None
    assert (halted["permissionDecision"], halted["continue"]) == ("deny", False)
    context = _render(COPILOT, "SessionStart", outcome="allow", context=["be careful"])
    assert context == {
        "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "be careful"}
    }
    degraded = _render(COPILOT, "Stop", outcome="allow", degraded=True, reason="late")
    assert degraded == {"systemMessage": "hookbus: late"}


def test_qwen_answers_in_claude_codes_forms_and_denies_an_ask() -> None:
    assert _render(QWEN, "PreToolUse", outcome="deny", reason="no") == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "no",
        }
    }
    asked = _render(QWEN, "PreToolUse", outcome="ask", reason="prod")
    assert asked is not None
    specific = asked["hookSpecificOutput"]
    assert specific["permissionDecision"] == "deny"
    assert "a person must confirm this call (prod)" in specific["permissionDecisionReason"]
    assert _render(QWEN, "Stop", outcome="deny", reason="go on") == {
        "decision": "block",
        "reason": "go on",
    }


def test_qwen_todo_events_become_the_catalogues_task_kinds() -> None:
    assert QWEN.route("TodoCreated").kind == "TaskCreated"
    assert QWEN.route("TodoCompleted").kind == "TaskCompleted"
    assert QWEN.canonical_tool("run_shell_command") == "Bash"
    assert QWEN.canonical_tool("read_file") == "Read"


def test_an_internal_error_on_copilots_own_permission_request_still_denies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(hook, "answer_event", broken)
    code, out, _ = run("copilot", fixture("copilot", "PermissionRequest"), UNREACHABLE)
    assert code == 0
    assert out["behavior"] == "deny"
    assert "internal error" in out["message"]


def _nested_permission_request() -> bytes:
    """Copilot's own camelCase PermissionRequest, nested past any JSON parser's depth."""
    head = json.dumps(fixture("copilot", "PermissionRequest"))[:-1]
    return (head + ', "toolInput": ' + "[" * 100_000 + "]" * 100_000 + "}").encode()


def test_copilots_own_permission_request_that_cannot_be_read_gets_its_own_deny_form() -> None:
    out, err = io.StringIO(), io.StringIO()
    code = hook.run(
        "copilot",
        ["--timeout", "5"],
        stdin=io.BytesIO(_nested_permission_request()),
        stdout=out,
        stderr=err,
        environ=UNREACHABLE,
    )
    answer = json.loads(out.getvalue())
    # Copilot ignores {"decision": "block"} on a PermissionRequest: its deny is behavior
    assert code == 0 and answer["behavior"] == "deny", answer
    assert "nested too deeply" in answer["message"]


def test_the_gateway_denies_copilots_unreadable_permission_request_in_its_own_form() -> None:
    from starlette.testclient import TestClient

    from hookbus.bus.settings.loader import Settings
    from hookbus.harnesses.gateway import create_app

    app = create_app(Settings(redis_url="redis://127.0.0.1:1/0", namespace="copilot-unread"))
    with TestClient(app) as client:
        response = client.post("/v1/hooks/copilot", content=_nested_permission_request())
    assert response.status_code == 200
    assert response.json()["behavior"] == "deny", response.json()
