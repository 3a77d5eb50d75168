"""A tool call's name as its guard request and its post event carry it: the two agree for
every agent CLI's captured events, and nothing else matches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from hookbus.bus.wire import Event
from hookbus.harnesses.adapters import adapter
from hookbus.harnesses.lean import hook
from hookbus.workers.unguarded.marks import guarded_names, ran_name

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
#: Each CLI's captured guard event and post event of the same tool call.
PAIRS = {
    "claude-code": ("claude_code", "PreToolUse", "PostToolUse"),
    "codex": ("codex", "PreToolUse", "PostToolUse"),
    "copilot": ("copilot", "PreToolUse", "PostToolUse"),
    "gemini-cli": ("gemini_cli", "BeforeTool", "AfterTool"),
    "qwen-code": ("qwen_code", "PreToolUse", "PostToolUse"),
    "cline": ("cline", "PreToolUse", "PostToolUse"),
    "opencode": ("opencode", "tool.execute.before", "tool.execute.after"),
    "kilo": ("kilo", "tool.execute.before", "tool.execute.after"),
}


def bus_event(cli: str, name: str, **changes: Any) -> Event:
    folder = PAIRS[cli][0]
    data: dict[str, Any] = json.loads((FIXTURES / folder / f"{name}.json").read_text())
    data.update(changes)
    harness = adapter(cli)
    if harness.normalize is not None:
        data = harness.normalize(data)
    built = hook.build_event(harness, harness.route(name), data, {"HOOKBUS_AGENT_ID": "a1"})
    return msgspec.convert(built, Event)


@pytest.mark.parametrize("cli", sorted(PAIRS))
def test_the_post_event_names_the_call_its_guard_was_asked_about(cli: str) -> None:
    _, pre, post = PAIRS[cli]
    name = ran_name(bus_event(cli, post))
    assert name is not None
    assert name in guarded_names(bus_event(cli, pre))


@pytest.mark.parametrize("cli", sorted(PAIRS))
def test_another_session_or_agent_never_matches(cli: str) -> None:
    _, pre, post = PAIRS[cli]
    marks = guarded_names(bus_event(cli, pre))
    assert ran_name(bus_event(cli, post, session_id="someone-else")) not in marks
    other_agent = bus_event(cli, post)
    other_agent.agent_id = "a2"
    assert ran_name(other_agent) not in marks


def test_without_an_id_another_input_is_another_call() -> None:
    marks = guarded_names(bus_event("copilot", "PreToolUse"))
    changed = bus_event("copilot", "PostToolUse", tool_input={"command": "rm -rf /"})
    assert ran_name(changed) not in marks


def test_a_rewritten_input_is_named_both_ways() -> None:
    pre = Event(
        kind="PreToolUse",
        session_id="s1",
        agent_id="a1",
        payload={"tool_name": "Bash", "tool_input": {"command": "rm -rf build"}},
    )
    safer = {"tool_input": {"command": "rm -rf ./build"}}
    post = Event(
        kind="PostToolUse",
        session_id="s1",
        agent_id="a1",
        payload={"tool_name": "Bash", "tool_input": {"command": "rm -rf ./build"}},
    )
    assert ran_name(post) not in guarded_names(pre)
    assert ran_name(post) in guarded_names(pre, safer)


def test_key_order_of_the_input_does_not_matter() -> None:
    pre = Event(kind="PreToolUse", payload={"tool_name": "Edit", "tool_input": {"a": 1, "b": 2}})
    post = Event(kind="PostToolUse", payload={"tool_name": "Edit", "tool_input": {"b": 2, "a": 1}})
    assert ran_name(post) in guarded_names(pre)


def test_only_guard_kinds_mark_and_only_post_kinds_are_looked_up() -> None:
    payload = {"tool_name": "Bash", "tool_use_id": "t1"}
    assert guarded_names(Event(kind="PostToolUse", payload=payload)) == []
    assert guarded_names(Event(kind="PromptSubmit", payload=payload)) == []
    assert ran_name(Event(kind="PreToolUse", payload=payload)) is None
    assert ran_name(Event(kind="PostToolUseFailure", payload=payload)) is not None
    assert ran_name(Event(kind="PostToolUse", payload={"duration_ms": 3})) is None
