"""The event catalogue: canonical kinds, aliases, Claude Code names, custom kinds."""

from __future__ import annotations

import pytest

from hookbus.bus.kinds import CLAUDE_CODE_EXTRA_KINDS, DEFAULT_CATALOGUE
from hookbus.errors import UnknownEventKind


@pytest.mark.parametrize(
    ("alias", "kind"),
    [
        ("before_tool_call", "PreToolUse"),
        ("BeforeToolCall", "PreToolUse"),
        ("PreAbilityCall", "PreToolUse"),
        ("pretooluse", "PreToolUse"),
        ("UserPromptSubmit", "PromptSubmit"),
        ("before_prompt_build", "PromptSubmit"),
        ("on_session_end", "SessionEnd"),
        ("session_terminated", "SessionEnd"),
        ("SessionStop", "SessionEnd"),
        ("AfterToolCall", "PostToolUse"),
        ("response_complete", "Stop"),
        ("ModelOutput", "LLMOutput"),
        ("PRE_COMPACT", "PreCompact"),
    ],
)
def test_aliases_resolve_case_insensitively_to_their_canonical_kind(alias: str, kind: str) -> None:
    assert DEFAULT_CATALOGUE.canonical(alias) == kind


def test_blocking_defaults_follow_the_design_table() -> None:
    blocking = {s.kind for s in DEFAULT_CATALOGUE.specs if s.blocking}
    assert blocking == {"PromptSubmit", "BeforeLLMCall", "PreToolUse", "PermissionRequest"}


def test_observe_only_kinds_may_not_block() -> None:
    for kind in ("LLMOutput", "Notification", "SessionEnd"):
        spec = DEFAULT_CATALOGUE.resolve(kind)
        assert not spec.may_block
        assert spec.observe_only


def test_pre_tool_use_may_deny_ask_halt_and_rewrite_tool_input() -> None:
    spec = DEFAULT_CATALOGUE.resolve("PreToolUse")
    assert spec.verdicts == {"deny", "ask", "halt"}
    assert spec.modifiable == {"tool_input"}
    assert spec.signals


def test_permission_request_is_blocking_with_allow_deny_or_ask() -> None:
    spec = DEFAULT_CATALOGUE.resolve("PermissionRequest")
    assert spec.blocking
    # ask: the CLI's own prompt, or an operator's approval inbox when the hook routes there
    assert spec.verdicts == {"deny", "ask"}


@pytest.mark.parametrize("name", CLAUDE_CODE_EXTRA_KINDS)
def test_other_claude_code_events_are_accepted_as_non_blocking_kinds(name: str) -> None:
    spec = DEFAULT_CATALOGUE.resolve(name)
    assert spec.kind == name
    assert not spec.blocking
    assert not spec.may_block


def test_an_unknown_kind_raises_listing_the_known_ones() -> None:
    with pytest.raises(UnknownEventKind) as info:
        DEFAULT_CATALOGUE.resolve("PreToolUze")
    assert "PreToolUse" in str(info.value)
    assert "PreToolUse" in info.value.known


def test_config_may_declare_custom_kinds() -> None:
    catalogue = DEFAULT_CATALOGUE.with_custom({"DeployRequested": True, "Heartbeat": False})
    deploy = catalogue.resolve("deploy_requested")
    assert deploy.custom and deploy.may_block and deploy.verdicts == {"deny"}
    assert catalogue.resolve("heartbeat").observe_only
    with pytest.raises(UnknownEventKind):
        DEFAULT_CATALOGUE.resolve("DeployRequested")


def test_custom_kinds_never_shadow_built_in_ones() -> None:
    catalogue = DEFAULT_CATALOGUE.with_custom(["PreToolUse"])
    assert catalogue.resolve("PreToolUse").blocking
