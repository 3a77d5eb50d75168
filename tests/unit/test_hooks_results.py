"""Result contracts: hookbus, Claude Code, seed 001 and MicroClaw answers; enforcement."""

from __future__ import annotations

from typing import Any

import pytest

from hookbus.bus.kinds import DEFAULT_CATALOGUE
from hookbus.bus.wire import HookResult, HookSignal
from hookbus.errors import HookExecutionError
from hookbus.hooks.permissions import apply_updates, permissions
from hookbus.hooks.results import CONTINUE, coerce_result


def coerce(raw: Any) -> HookResult:
    return coerce_result(raw, "h")


def test_none_and_an_empty_dict_continue() -> None:
    assert coerce(None) is CONTINUE
    assert coerce({}) is CONTINUE


def test_a_hook_result_passes_through_unchanged() -> None:
    result = HookResult(outcome="deny", reason="r")
    assert coerce(result) is result


def test_hookbus_form() -> None:
    result = coerce(
        {
            "outcome": "deny",
            "reason": "nope",
            "updated": {"tool_input": {"command": "ls"}},
            "context": "one line",
            "signals": [{"kind": "ability_guard", "code": "X", "severity": "warning"}],
            "logs": ["a", "b"],
        }
    )
    assert result.outcome == "deny" and result.reason == "nope"
    assert result.updated == {"tool_input": {"command": "ls"}}
    assert result.context == ["one line"]
    assert result.signals == [HookSignal(kind="ability_guard", code="X", severity="medium")]
    assert result.logs == ["a", "b"]


@pytest.mark.parametrize(
    ("raw", "outcome", "reason"),
    [
        ({"decision": "block", "reason": "bad"}, "deny", "bad"),
        ({"decision": "approve"}, "continue", None),
        ({"continue": False, "stopReason": "stop now"}, "halt", "stop now"),
        (
            {
                "hookSpecificOutput": {
                    "permissionDecision": "deny",
                    "permissionDecisionReason": "why",
                }
            },
            "deny",
            "why",
        ),
        ({"hookSpecificOutput": {"permissionDecision": "ask"}}, "ask", None),
        ({"hookSpecificOutput": {"permissionDecision": "allow"}}, "continue", None),
        ({"hookSpecificOutput": {"decision": {"behavior": "deny", "message": "m"}}}, "deny", "m"),
    ],
)
def test_claude_code_form(raw: dict[str, Any], outcome: str, reason: str | None) -> None:
    result = coerce(raw)
    assert (result.outcome, result.reason) == (outcome, reason)


def test_claude_code_updated_input_and_additional_context() -> None:
    result = coerce(
        {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "updatedInput": {"command": "ls -la"},
                "additionalContext": "remember the rules",
            }
        }
    )
    assert result.updated == {"tool_input": {"command": "ls -la"}}
    assert result.context == ["remember the rules"]


def test_halt_beats_deny_beats_ask_when_one_answer_says_several() -> None:
    result = coerce(
        {
            "decision": "block",
            "reason": "deny reason",
            "continue": False,
            "stopReason": "halt reason",
            "hookSpecificOutput": {"permissionDecision": "ask"},
        }
    )
    assert (result.outcome, result.reason) == ("halt", "halt reason")
    assert (
        coerce({"hookSpecificOutput": {"permissionDecision": "ask"}, "decision": "block"}).outcome
        == "deny"
    )


def test_seed_001_signals_and_ability_guard_decisions() -> None:
    def guard(require_human: bool) -> dict[str, Any]:
        return {
            "hook_signals": [
                {
                    "source_event": "PreAbilityCall",
                    "hook_id": "prod_config_guard",
                    "kind": "ability_guard",
                    "code": "ABILITY_DENIED",
                    "severity": "error",
                    "payload": {
                        "ability_id": "edit_file",
                        "reason": "prod config",
                        "require_human": require_human,
                    },
                }
            ],
            "logs": ["checked"],
        }

    denied = coerce(guard(False))
    assert (denied.outcome, denied.reason) == ("deny", "prod config")
    assert denied.signals[0].severity == "high"
    assert denied.logs == ["checked"]
    assert coerce(guard(True)).outcome == "ask"
    hint = coerce(
        {
            "hook_signals": [
                {
                    "kind": "routing_hint",
                    "code": "ROUTE_SUGGESTION",
                    "payload": {"suggested_abilities": []},
                }
            ]
        }
    )
    assert hint.outcome == "continue" and hint.signals[0].kind == "routing_hint"


def test_seed_001_error_is_a_hook_error() -> None:
    with pytest.raises(HookExecutionError, match="BUILD_FAILED: tests failed"):
        coerce({"error": {"code": "BUILD_FAILED", "message": "tests failed"}})


def test_microclaw_form() -> None:
    blocked = coerce({"action": "block", "reason": "secret file"})
    assert (blocked.outcome, blocked.reason) == ("deny", "secret file")
    modified = coerce({"action": "modify", "arguments": {"path": "/tmp/x"}, "hint": "be careful"})
    assert modified.updated == {"tool_input": {"path": "/tmp/x"}}
    assert modified.context == ["be careful"]
    assert coerce({"action": "allow"}).outcome == "continue"


@pytest.mark.parametrize(
    "raw",
    [
        "a string",
        42,
        [1, 2],
        {"outcome": 3},
        {"context": 5},
        {"signals": "x"},
        {"signals": [{"code": "no kind"}]},
        {"updated": [1]},
        {"decision": 7},
    ],
)
def test_answers_in_no_accepted_form_are_hook_errors(raw: Any) -> None:
    with pytest.raises(HookExecutionError):
        coerce(raw)


def test_an_unknown_verdict_word_stops_the_chain_as_a_deny_and_says_so() -> None:
    result = coerce({"outcome": "EXPLODE", "reason": "weird"})
    assert (result.outcome, result.reason) == ("deny", "weird")
    assert result.logs == ["unknown outcome 'EXPLODE' treated as deny"]


def test_unknown_keys_are_ignored() -> None:
    assert coerce({"usage_recorded": True, "future_field": {"x": 1}}) is CONTINUE


def test_allow_keys_let_a_hook_change_only_the_named_nested_keys() -> None:
    spec = DEFAULT_CATALOGUE.resolve("PreToolUse")
    perms = permissions(spec, ["command"])
    notes: list[str] = []
    payload = {"tool_name": "Bash", "tool_input": {"command": "rm -rf /", "timeout": 5}}
    new, kept = apply_updates(
        payload,
        {
            "tool_input": {"command": "ls", "timeout": 99, "description": "same"},
            "tool_name": "Write",
        },
        perms,
        notes,
    )
    assert new["tool_input"] == {"command": "ls", "timeout": 5}
    assert new["tool_name"] == "Bash"
    assert kept == {"tool_input": {"command": "ls", "timeout": 5}}
    assert any("tool_input.timeout" in n for n in notes)
    assert any("'tool_name'" in n for n in notes)
    assert payload["tool_input"]["command"] == "rm -rf /"  # the input is not mutated


def test_an_unchanged_key_repeated_in_a_full_updated_input_is_not_a_dropped_change() -> None:
    perms = permissions(DEFAULT_CATALOGUE.resolve("PreToolUse"), ["tool_input.command"])
    notes: list[str] = []
    _new, kept = apply_updates(
        {"tool_input": {"command": "a", "timeout": 5}},
        {"tool_input": {"command": "b", "timeout": 5}},
        perms,
        notes,
    )
    assert kept == {"tool_input": {"command": "b", "timeout": 5}}
    assert notes == []


def test_a_manifest_without_allow_keys_may_change_nothing() -> None:
    perms = permissions(DEFAULT_CATALOGUE.resolve("PreToolUse"), [])
    notes: list[str] = []
    _new, kept = apply_updates(
        {"tool_input": {"command": "a"}}, {"tool_input": {"command": "b"}}, perms, notes
    )
    assert kept == {} and "modify.allow_keys" in notes[0]
