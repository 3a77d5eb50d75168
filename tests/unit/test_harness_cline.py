"""Cline's row of the adapter table, on the hook inputs captured from the real binary
(``tests/fixtures/cline``, re-captured by ``scripts/capture_agent_cli_fixtures.py cline``):
Cline's own shape becomes the common one, its ``run_commands`` becomes ``Bash``, and every
answer renders in the one form Cline reads (a refusal that lets the task go on where the
tool is known, ``cancel`` where it is not)."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path
from typing import Any

import msgspec
import pytest

from hookbus import simple_commands
from hookbus.bus.kinds import DEFAULT_CATALOGUE
from hookbus.bus.wire import Event
from hookbus.harnesses.adapters import REQUEST, Answer, adapter
from hookbus.harnesses.cline_adapter import ADAPTER as CLINE
from hookbus.harnesses.cline_adapter import REFUSED_OUTPUT, normalize, shell_input
from hookbus.harnesses.lean import hook
from hookbus.hooks.loader import load_hooks
from hookbus.hooks.registry import HookRegistry

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cline"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "hooks"
CAPTURED = sorted(path.stem for path in FIXTURES.glob("*.json"))
UNREACHABLE = {"HOOKBUS_REDIS_URL": "redis://127.0.0.1:1/0"}
REASON = "refused: destructive command (mkfs.ext4 formats a disk); name the exact path or device"


def fixture(name: str, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    data.update(changes)
    return data


def pre_tool_use(tool: str, tool_input: Any) -> dict[str, Any]:
    return fixture("PreToolUse", tool_call={"id": "call_1", "name": tool, "input": tool_input})


def run(data: dict[str, Any] | bytes, env: dict[str, str]) -> tuple[int, Any, str]:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    out, err = io.StringIO(), io.StringIO()
    code = hook.run(
        "cline", ["--timeout", "5"], stdin=io.BytesIO(raw), stdout=out, stderr=err, environ=env
    )
    text = out.getvalue()
    return code, (json.loads(text) if text else None), err.getvalue()


def render(data: dict[str, Any], **decision: Any) -> dict[str, Any] | None:
    event = normalize(dict(data))
    out = CLINE.render(CLINE.route(event["hook_event_name"]), Answer(decision, event=event))
    assert out.exit_code == 0
    return dict(out.stdout) if out.stdout is not None else None


def bus_event(data: dict[str, Any]) -> Event:
    event = normalize(dict(data))
    built = hook.build_event(CLINE, CLINE.route(event["hook_event_name"]), event, {})
    return msgspec.convert(built, Event)


def test_the_fixtures_hold_every_event_that_fires_headless() -> None:
    assert set(CAPTURED) == {
        "TaskStart",
        "PreToolUse",
        "PostToolUse",
        "TaskComplete",
        "SessionShutdown",
    }
    assert set(CAPTURED) <= set(CLINE.routes)


def test_every_route_names_a_catalogue_kind_and_only_the_tool_call_is_waited_for() -> None:
    assert adapter("cline") is CLINE
    for route in CLINE.routes.values():
        assert DEFAULT_CATALOGUE.resolve(route.kind).kind == route.kind, route
    assert [r.name for r in CLINE.routes.values() if r.mode == REQUEST] == ["PreToolUse"]
    assert [r.name for r in CLINE.routes.values() if r.guard] == ["PreToolUse"]
    assert not CLINE.routes["PreCompact"].install  # Cline knows the name but never runs it


@pytest.mark.parametrize("name", CAPTURED)
def test_every_captured_event_is_named_by_its_file_and_filed_under_the_root_session(
    name: str,
) -> None:
    data = fixture(name)
    event = bus_event(data)
    assert event.meta["event_name"] == name
    assert event.meta["harness"] == "cline"
    assert event.session_id == data["sessionContext"]["rootSessionId"]
    assert event.agent_id == data["agent_id"]
    assert event.meta["cwd"] == data["workspaceRoots"][0]
    assert "preToolUse" not in event.payload and "postToolUse" not in event.payload


def test_a_shell_call_arrives_as_bash_with_its_command_and_the_call_id() -> None:
    pre, post = bus_event(fixture("PreToolUse")), bus_event(fixture("PostToolUse"))
    for event in (pre, post):
        assert event.payload["tool_name"] == "Bash"
        assert event.payload["harness_tool_name"] == "run_commands"
        assert event.payload["tool_input"] == {
            "command": "echo captured",
            "commands": ["echo captured"],
        }
        assert event.payload["tool_use_id"] == "call_fake0001"
    assert post.payload["tool_response"] == [
        {"query": "echo captured", "result": "captured\n", "success": True}
    ]


@pytest.mark.parametrize(
    ("raw", "command"),
    [
        ({"commands": ["ls -la"]}, "ls -la"),
        ({"commands": "ls"}, "ls"),
        ("ls", "ls"),
        (["ls"], "ls"),
        ({"command": "ls"}, "ls"),
        ({"cmd": "ls"}, "ls"),
        ({"command": "git", "args": ["status", "-s"]}, "git status -s"),
    ],
)
def test_every_shape_cline_runs_as_commands_reads_as_one_command_line(
    raw: Any, command: str
) -> None:
    assert shell_input(raw)["command"] == command


def test_several_commands_are_each_their_own_shell_so_an_open_quote_hides_nothing() -> None:
    raw = {"commands": ["echo 'x", "mkfs.ext4 -q -F disk.img", "'"]}
    command = shell_input(raw)["command"]
    assert ["mkfs.ext4", "-q", "-F", "disk.img"] in simple_commands(command)


@pytest.mark.parametrize("raw", [{"commands": [{"bogus": 1}]}, {"commands": [1]}, {"other": "x"}])
def test_a_command_it_cannot_read_is_no_string_so_a_guard_refuses_it(raw: Any) -> None:
    assert not isinstance(shell_input(raw)["command"], str)


@pytest.mark.parametrize("name", CAPTURED)
def test_every_captured_event_with_redis_unreachable_refuses_the_guard_and_passes_the_rest(
    name: str,
) -> None:
    code, out, err = run(fixture(name), UNREACHABLE)
    assert code == 0
    assert "cannot reach Redis" in err
    if name != "PreToolUse":
        assert out is None
        return
    (echo,) = out["overrideInput"]["commands"]
    assert out["contextModification"].startswith("hookbus is unavailable (cannot reach Redis at")
    printed = subprocess.run(["sh", "-c", echo], capture_output=True, text=True, check=True)
    assert out["contextModification"] in printed.stdout


def test_a_refused_shell_call_runs_an_echo_of_the_reason_word_for_word() -> None:
    reason = 'refused: it\'s `$(rm -rf ~)` and "quoted"\nover two lines'
    out = render(fixture("PreToolUse"), outcome="deny", reason=reason)
    assert out is not None
    (echo,) = out["overrideInput"]["commands"]
    printed = subprocess.run(["sh", "-c", echo], capture_output=True, text=True, check=True)
    assert printed.stdout == REFUSED_OUTPUT.format(reason=reason) + "\n"
    assert out["contextModification"] == reason
    assert "cancel" not in out


def test_another_built_in_tool_is_refused_with_a_null_input_and_the_reason_as_context() -> None:
    call = pre_tool_use("read_files", {"files": [{"path": "/srv/app/.env"}]})
    assert render(call, outcome="deny", reason="a secret") == {
        "overrideInput": None,
        "contextModification": "hookbus refused read_files: a secret",
    }


def test_a_tool_the_adapter_does_not_know_stops_the_task() -> None:
    # an MCP tool runs a null input as {}: only cancel keeps it from running
    call = pre_tool_use("github__delete_repository", {})
    assert render(call, outcome="deny", reason="no") == {"cancel": True, "errorMessage": "no"}
    out = CLINE.render(CLINE.route("PreToolUse"), Answer({"outcome": "deny", "reason": "no"}))
    assert out.stdout == {"cancel": True, "errorMessage": "no"}  # the call not known


def test_ask_is_a_refusal_saying_a_person_must_confirm_and_halt_stops_the_task() -> None:
    asked = render(fixture("PreToolUse"), outcome="ask", reason="prod")
    assert asked is not None
    assert asked["contextModification"].startswith("a person must confirm this call (prod)")
    assert render(fixture("PreToolUse"), outcome="halt", reason="enough") == {
        "cancel": True,
        "errorMessage": "enough",
    }


def test_a_rewritten_input_is_cline_s_override_a_shell_rewrite_back_into_commands() -> None:
    safer = {"tool_input": {"command": "ls -la", "commands": ["echo captured"]}}
    assert render(fixture("PreToolUse"), outcome="allow", updated=safer) == {
        "overrideInput": {"commands": ["ls -la"]}
    }
    call = pre_tool_use("editor", {"path": "/a", "new_text": "x"})
    new = {"tool_input": {"path": "/b", "new_text": "x"}}
    assert render(call, outcome="allow", updated=new) == {
        "overrideInput": {"path": "/b", "new_text": "x"}
    }


def test_context_is_a_context_modification_and_no_objection_prints_nothing() -> None:
    assert render(fixture("PreToolUse"), outcome="allow", context=["mind the tests"]) == {
        "contextModification": "mind the tests"
    }
    assert render(fixture("PreToolUse"), outcome="allow") is None
    assert render(fixture("PostToolUse"), outcome="allow", context=["ignored"]) == {
        "contextModification": "ignored"
    }


def test_input_nested_too_deeply_to_read_still_stops_the_call() -> None:
    raw = b'{"hookName": "tool_call", "tool_call": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    code, out, _ = run(raw, UNREACHABLE)
    assert code == 0
    assert out["cancel"] is True
    assert "nested too deeply" in out["errorMessage"]


def test_an_event_of_a_newer_cline_passes_under_its_own_name() -> None:
    code, out, err = run(fixture("TaskStart", hookName="agent_dream"), UNREACHABLE)
    assert (code, out) == (0, None)
    assert "agent_dream passes" in err


@pytest.mark.parametrize(
    "files",
    [[{"path": "deploy/prod.env"}], [{"path": "README.md"}, {"path": "/srv/app/.env"}]],
)
def test_a_read_of_a_secret_file_is_refused_by_the_example_guard_one_file_or_several(
    files: list[dict[str, str]],
) -> None:
    report = load_hooks(EXAMPLES)
    registry = HookRegistry()
    try:
        assert registry.replace_dynamic(report.hooks, version="examples") == []
        decision = registry.run(bus_event(pre_tool_use("read_files", {"files": files})))
    finally:
        registry.close()
    assert decision.outcome == "deny"
    assert "secret file" in (decision.reason or "")


@pytest.mark.parametrize("raw", [b"", b'{"no": "hookName"}', b"[1, 2]"])
def test_input_naming_no_event_is_answered_with_clines_own_refusal(raw: bytes) -> None:
    # Cline reads no other refusal: the generic decision-block would let the call run
    out = hook.unreadable(CLINE, raw, "the hook input is not a hook event")
    assert out.stdout is not None and out.stdout["cancel"] is True
