"""Conditions on tool arguments (``match.tool_input``) and tool allowlists
(``match.tools_except`` + ``hookbus.harnesses.guards:deny_tool``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hookbus.bus.wire import Event
from hookbus.errors import ManifestError
from hookbus.hooks.conditions import compile_match
from hookbus.hooks.loader import load_hooks
from hookbus.hooks.manifest import parse_toml
from hookbus.hooks.registry import HookRegistry

ROOT = Path(__file__).resolve().parents[2]


def call(tool: str, **tool_input: Any) -> Event:
    return Event(kind="PreToolUse", payload={"tool_name": tool, "tool_input": tool_input})


def holds(match: dict[str, Any], event: Event) -> bool:
    predicate = compile_match(match)
    assert predicate is not None
    return predicate(event)


@pytest.mark.parametrize(
    ("test", "value", "expected"),
    [
        ("git push*", "git push --force origin main", True),
        ("git push*", "git status", False),
        ({"glob": "*.env"}, "deploy/prod.env", True),
        ({"regex": r"--force(\s|$)"}, "git push --force", True),
        ({"regex": r"--force(\s|$)"}, "git push --force-with-lease", False),
        ({"equals": "main"}, "main", True),
        ({"equals": "main"}, "main2", False),
    ],
)
def test_a_tool_input_field_matches_by_glob_regex_or_equality(
    test: Any, value: str, expected: bool
) -> None:
    assert holds({"tool_input": {"command": test}}, call("Bash", command=value)) is expected


def test_dotted_paths_reach_nested_fields_and_values_compare_by_type() -> None:
    event = call("Deploy", options={"force": True, "replicas": 3, "region": "eu-west-1"})
    assert holds({"tool_input": {"options.force": True}}, event)
    assert not holds({"tool_input": {"options.force": 1}}, event)  # True is not 1
    assert holds({"tool_input": {"options.replicas": 3.0}}, event)
    assert holds({"tool_input": {"options.region": "eu-*"}}, event)
    assert not holds({"tool_input": {"options.missing": "*"}}, event)
    assert not holds({"tool_input": {"options.force": "*"}}, event)  # a glob needs a string


def test_every_field_test_must_hold() -> None:
    match = {"tools": "Bash", "tool_input": {"command": "rm *", "description": "*cleanup*"}}
    assert holds(match, call("Bash", command="rm x", description="a cleanup step"))
    assert not holds(match, call("Bash", command="rm x", description="other"))


def test_tools_except_selects_every_tool_it_does_not_name() -> None:
    match = {"tools_except": ["Read", "Grep", "mcp__github__*"]}
    assert holds(match, call("Write", file_path="x"))
    assert not holds(match, call("Read", file_path="x"))
    assert not holds(match, call("mcp__github__create_issue"))
    assert not holds(match, Event(kind="PreToolUse", payload={}))  # no tool: not a tool call


@pytest.mark.parametrize(
    "bad",
    [
        '[match.tool_input]\n"" = "x"\n',
        '[match.tool_input]\n"a..b" = "x"\n',
        '[match.tool_input]\ncommand = { glob = "x", regex = "y" }\n',
        '[match.tool_input]\ncommand = { like = "x" }\n',
        '[match.tool_input]\ncommand = { regex = "(" }\n',
        "[match.tool_input]\ncommand = [1, 2]\n",
    ],
)
def test_a_malformed_field_test_is_refused_when_the_manifest_is_read(bad: str) -> None:
    text = 'name = "g"\nevents = ["PreToolUse"]\n[action.python]\nentrypoint = "m:f"\n' + bad
    with pytest.raises(ManifestError, match="tool_input"):
        parse_toml(text, Path("g/HOOK.toml"))


def test_the_allowlist_example_denies_unlisted_tools_and_names_them() -> None:
    report = load_hooks(ROOT / "examples" / "claude-code" / "hooks")
    assert report.ok, [str(p) for p in report.problems]
    registry = HookRegistry()
    try:
        assert registry.replace_dynamic(report.hooks, version="t") == []
        denied = registry.run(call("WebFetch", url="https://example.com"))
        assert denied.outcome == "deny"
        assert denied.reason == (
            "refused: WebFetch is not on this fleet's tool allowlist; use an allowed tool"
        )
        assert registry.run(call("Read", file_path="README.md")).outcome == "allow"
        assert registry.run(call("Bash", command="ls")).outcome == "allow"
    finally:
        registry.close()
