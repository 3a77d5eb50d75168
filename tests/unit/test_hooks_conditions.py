"""Conditions (``match``): each field selects events as documented."""

from __future__ import annotations

from typing import Any

import pytest

from hookbus.bus.wire import Caller, Event
from hookbus.hooks.conditions import compile_match
from hookbus.hooks.spec_models import MatchSpec


def matches(spec: dict[str, Any], **event: Any) -> bool:
    predicate = compile_match(MatchSpec.model_validate(spec))
    if predicate is None:  # nothing to check: every event matches
        return True
    return predicate(Event(kind=event.pop("kind", "PreToolUse"), **event))


def test_an_empty_match_compiles_to_none_so_the_chain_skips_the_check() -> None:
    assert compile_match(MatchSpec()) is None
    assert compile_match(None) is None


def test_tools_and_ability_scope_are_globs_over_the_tool_name() -> None:
    assert matches({"tools": ["Bash"]}, payload={"tool_name": "Bash"})
    assert not matches({"tools": ["Bash"]}, payload={"tool_name": "Write"})
    assert matches({"tools": ["mcp__*"]}, payload={"tool_name": "mcp__github__pr"})
    assert matches({"ability_scope": "edit_*"}, payload={"ability_id": "edit_file"})
    assert matches({"ability_scope": "*"}, payload={})
    assert compile_match(MatchSpec(ability_scope=["*"])) is None
    assert not matches({"tools": ["Bash"]}, payload={})


def test_agents_sessions_channels_and_users() -> None:
    assert matches({"agents": ["claude-*"]}, agent_id="claude-7")
    assert not matches({"agents": ["claude-*"]}, agent_id="gpt")
    assert not matches({"agents": ["claude-*"]})
    assert matches({"sessions": ["s1", "s2"]}, session_id="s2")
    assert matches({"channels": ["ops"]}, meta={"channel": "ops"})
    assert not matches({"users": ["alice"]}, meta={"user": "bob"})


def test_callers_select_by_source() -> None:
    assert matches({"callers": ["ci_pipeline"]}, caller=Caller(source="ci_pipeline"))
    assert not matches({"callers": ["ci_pipeline"]}, caller=Caller(source="ai_session"))


def test_pattern_searches_a_named_payload_field_or_the_whole_payload() -> None:
    spec = {"pattern": r"rm\s+-rf", "field": "tool_input.command"}
    assert matches(spec, payload={"tool_input": {"command": "sudo rm  -rf /"}})
    assert not matches(spec, payload={"tool_input": {"command": "ls"}})
    assert not matches(spec, payload={"tool_input": "not a table"})
    assert matches({"pattern": "secret"}, payload={"prompt": "tell me the secret"})
    assert matches({"pattern": '"n": 3|"n":3', "field": "x"}, payload={"x": {"n": 3}})


def test_min_duration_ms_selects_slow_calls() -> None:
    spec = {"min_duration_ms": 100}
    assert matches(spec, kind="PostToolUse", payload={"duration_ms": 150})
    assert not matches(spec, kind="PostToolUse", payload={"duration_ms": 10})
    assert not matches(spec, kind="PostToolUse", payload={})


def test_only_if_changed_paths_needs_one_matching_changed_file() -> None:
    spec = {"only_if_changed_paths": ["services/**", "apps/**"]}
    assert matches(
        spec, kind="SessionEnd", payload={"changed_files": ["README.md", "services/a/b.py"]}
    )
    assert not matches(spec, kind="SessionEnd", payload={"changed_files": ["docs/x.md"]})
    assert not matches(spec, kind="SessionEnd", payload={})


def test_every_condition_must_hold() -> None:
    spec = {"tools": ["Bash"], "agents": ["a1"]}
    assert matches(spec, agent_id="a1", payload={"tool_name": "Bash"})
    assert not matches(spec, agent_id="a2", payload={"tool_name": "Bash"})


def test_a_dict_is_accepted_and_validated() -> None:
    predicate = compile_match({"tools": "Bash"})
    assert predicate is not None
    assert predicate(Event(kind="PreToolUse", payload={"tool_name": "Bash"}))
    with pytest.raises(ValueError):
        compile_match({"no_such_condition": 1})
