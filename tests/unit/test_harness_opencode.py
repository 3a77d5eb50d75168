"""OpenCode's and Kilo CLI's rows of the adapter table: one implementation, two rows; every
hook input captured from the real binaries (``tests/fixtures/opencode``, ``tests/fixtures/
kilo``) maps onto the bus event with canonical tool names, and each answer renders as the
JSON the plugin applies."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from hookbus.bus.kinds import DEFAULT_CATALOGUE
from hookbus.harnesses.adapters import REQUEST, Answer, adapter
from hookbus.harnesses.kilo_adapter import ADAPTER as KILO
from hookbus.harnesses.lean import hook
from hookbus.harnesses.opencode_adapter import ADAPTER as OPENCODE
from hookbus.harnesses.opencode_adapter import TOOL_BEFORE, normalize

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CLIS = ("opencode", "kilo")
CAPTURED = [(cli, path.stem) for cli in CLIS for path in sorted((FIXTURES / cli).glob("*.json"))]
UNREACHABLE = {"HOOKBUS_REDIS_URL": "redis://127.0.0.1:1/0"}
GUARDED = "mkfs.ext4 -q -F disk.img"


def fixture(cli: str, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / cli / f"{name}.json").read_text())
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


def rendered(name: str, decision: dict[str, Any] | None = None, **answer: Any) -> Any:
    out = OPENCODE.render(OPENCODE.route(name), Answer(decision, **answer))
    assert out.exit_code == 0
    return out.stdout


def test_kilo_is_opencodes_implementation_under_its_own_names() -> None:
    assert adapter("opencode") is OPENCODE and adapter("kilo") is KILO
    assert KILO.routes == OPENCODE.routes and KILO.render is OPENCODE.render
    assert KILO.normalize is OPENCODE.normalize
    assert KILO.settings["project"] == ".kilo/plugin/hookbus.js"
    assert OPENCODE.settings["user"] == "~/.config/opencode/plugin/hookbus.js"
    assert (KILO.binary, KILO.installer) == ("kilo", "hookbus.harnesses.install.kilo")


def test_every_route_names_a_catalogue_kind_and_the_tool_call_is_the_only_guard() -> None:
    for route in OPENCODE.routes.values():
        spec = DEFAULT_CATALOGUE.resolve(route.kind)
        assert spec.kind == route.kind, route
        if route.mode == REQUEST:
            assert spec.may_block, route
    assert [r.name for r in OPENCODE.routes.values() if r.guard] == [TOOL_BEFORE]


def test_the_fixtures_hold_the_hook_points_a_one_call_session_raises() -> None:
    for cli in CLIS:
        names = {
            normalize(fixture(cli, p.stem))["hook_event_name"]
            for p in (FIXTURES / cli).glob("*.json")
        }
        assert names == {
            "session.created",
            "chat.message",
            TOOL_BEFORE,
            "permission.asked",
            "tool.execute.after",
            "session.idle",
        }


@pytest.mark.parametrize(("cli", "name"), CAPTURED)
def test_every_captured_input_becomes_a_bus_event_of_its_session(cli: str, name: str) -> None:
    harness = adapter(cli)
    raw = fixture(cli, name)
    data = normalize(dict(raw))
    route = harness.route(data["hook_event_name"])
    assert route.name in harness.routes
    event = hook.build_event(harness, route, data, {})
    assert event["kind"] == route.kind
    assert event["session_id"].startswith("ses_")
    meta = {"harness": cli, "event_name": route.name, "hook": raw["hook"]}
    assert event["meta"].items() >= meta.items()
    if "tool_name" in data:
        assert event["payload"]["tool_name"] == "Bash"
        assert event["payload"]["harness_tool_name"] == "bash"
        # OpenCode asks for nothing by default: its permission capture is of an `ls`
        asked = "ls" if (cli, name) == ("opencode", "event.permission.asked") else GUARDED
        assert event["payload"]["tool_input"]["command"] == asked


def test_a_tool_call_carries_its_call_id_and_its_result() -> None:
    before = normalize(fixture("opencode", "tool.execute.before"))
    after = normalize(fixture("opencode", "tool.execute.after"))
    assert before["tool_use_id"] == after["tool_use_id"] == "call_fake0001"
    assert after["tool_response"]["metadata"]["exit"] == 1
    assert "does not exist" in after["tool_response"]["output"]


def test_the_prompt_is_the_text_of_the_users_parts() -> None:
    data = normalize(fixture("kilo", "chat.message"))
    assert data["prompt"] == '"run the command"'
    assert data["agent"] == "code"


def test_a_permission_request_arrives_as_an_event_naming_the_command() -> None:
    data = normalize(fixture("kilo", "event.permission.asked"))
    assert data["hook_event_name"] == "permission.asked"
    assert data["tool_input"]["command"] == GUARDED
    assert data["tool_use_id"] == "call_fake0001"
    assert OPENCODE.route("permission.asked").kind == "PermissionRequest"


def test_a_file_tools_path_is_given_to_guards_as_file_path_and_given_back_as_filepath() -> None:
    raw = {
        "hook": TOOL_BEFORE,
        "input": {"tool": "read", "sessionID": "ses_1", "callID": "c1"},
        "output": {"args": {"filePath": "/p/deploy/prod.env"}},
    }
    data = normalize(raw)
    assert data["tool_input"] == {
        "filePath": "/p/deploy/prod.env",
        "file_path": "/p/deploy/prod.env",
    }
    new = {"filePath": "/p/deploy/prod.env", "file_path": "/p/README.md"}
    out = rendered(TOOL_BEFORE, {"outcome": "allow", "updated": {"tool_input": new}})
    assert out == {"args": {"filePath": "/p/README.md"}}


def test_a_deny_halt_or_ask_on_the_tool_call_is_the_plugins_block() -> None:
    assert rendered(TOOL_BEFORE, {"outcome": "deny", "reason": "no mkfs"}) == {"block": "no mkfs"}
    assert rendered(TOOL_BEFORE, {"outcome": "halt"}) == {"block": "stopped by a hookbus hook"}
    ask = rendered(TOOL_BEFORE, {"outcome": "ask", "reason": "prod"})
    assert ask == {"block": "a person must confirm this call (prod); hookbus refuses it meanwhile"}
    assert rendered("chat.message", {"outcome": "deny", "reason": "no"}) == {"block": "no"}


def test_no_objection_is_no_output_and_context_joins_the_system_prompt() -> None:
    assert rendered(TOOL_BEFORE, {"outcome": "allow"}) is None
    out = rendered("chat.message", {"outcome": "allow", "context": ["a", "b"]})
    assert out == {"context": "a\nb"}
    degraded = rendered(TOOL_BEFORE, {"outcome": "allow", "degraded": True, "reason": "x"})
    assert degraded == {"systemMessage": "hookbus: x"}


def test_an_unavailable_bus_blocks_the_tool_call_and_passes_the_rest() -> None:
    out = rendered(TOOL_BEFORE, unavailable="no worker")
    assert (
        out["block"] == "hookbus is unavailable (no worker); blocked because this hook fails closed"
    )
    assert rendered("session.idle", unavailable="no worker") is None
    assert rendered("chat.message", unavailable="no worker") == {
        "systemMessage": "hookbus: no worker; chat.message passes"
    }


@pytest.mark.parametrize("cli", CLIS)
def test_the_hook_command_blocks_the_captured_call_with_redis_unreachable(cli: str) -> None:
    code, out, _ = run(cli, fixture(cli, "tool.execute.before"), UNREACHABLE)
    assert code == 0
    assert out["block"].startswith(
        "hookbus is unavailable (cannot reach Redis at redis://127.0.0.1:1"
    )
    code, out, err = run(cli, fixture(cli, "event.session.idle"), UNREACHABLE)
    assert (code, out) == (0, None)
    assert "session.idle passes" in err


def test_an_unknown_hook_point_passes_under_its_own_name() -> None:
    data = normalize({"hook": "event", "input": {"event": {"type": "todo.updated"}}})
    route = OPENCODE.route(data["hook_event_name"])
    assert (route.name, route.mode, route.guard) == ("todo.updated", "publish", False)


def test_a_common_field_given_beside_the_plugins_input_is_kept() -> None:
    data = normalize({**fixture("opencode", TOOL_BEFORE), "agent_id": "a9", "session_id": "s2"})
    event = hook.build_event(OPENCODE, OPENCODE.route(TOOL_BEFORE), data, {})
    assert (event["agent_id"], event["session_id"]) == ("a9", "s2")
    assert normalize(dict(data)) == data  # the lean hook normalises twice
