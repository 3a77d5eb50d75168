"""``hookbus gemini-cli|codex|copilot|qwen-code hook`` as the CLIs run them (a process per
event, JSON on stdin) and the gateway's ``/v1/hooks/<cli>``, against a real chain worker on
the real Redis.

Every event captured from the real binaries goes through the real command. The worker is
the scripted one of :mod:`tests.integration.test_claude_code_hook`: a marker in the payload
(``HOOKBUS_DENY``, ``HOOKBUS_CONTEXT``...) selects its answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from starlette.testclient import TestClient

from hookbus.bus import keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event, decode
from hookbus.harnesses.codex_adapter import ADAPTER as CODEX
from hookbus.harnesses.copilot_adapter import ADAPTER as COPILOT
from hookbus.harnesses.gateway import create_app
from hookbus.harnesses.gemini_adapter import ADAPTER as GEMINI
from hookbus.harnesses.qwen_adapter import ADAPTER as QWEN

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
FOLDERS = {
    "gemini-cli": FIXTURES / "gemini_cli",
    "codex": FIXTURES / "codex",
    "copilot": FIXTURES / "copilot",
    "qwen-code": FIXTURES / "qwen_code",
}
HARNESSES = {"gemini-cli": GEMINI, "codex": CODEX, "copilot": COPILOT, "qwen-code": QWEN}
CAPTURED = [(cli, p.stem) for cli, folder in FOLDERS.items() for p in sorted(folder.glob("*.json"))]


def fixture(cli: str, name: str, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FOLDERS[cli] / f"{name}.json").read_text())
    data.update(changes)
    return data


def run_hook(cli: str, data: dict[str, Any], url: str, ns: str) -> tuple[int, Any, str]:
    env = dict(os.environ, HOOKBUS_REDIS_URL=url, HOOKBUS_NAMESPACE=ns, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-m", "hookbus", cli, "hook", "--timeout", "10"],
        input=json.dumps(data).encode(),
        capture_output=True,
        env=env,
        cwd=ROOT / "tests",
        timeout=30,
    )
    out = done.stdout.decode()
    return done.returncode, (json.loads(out) if out.strip() else None), done.stderr.decode()


def _events(url: str, ns: str) -> list[Event]:
    client = redis.Redis.from_url(url, protocol=2)
    try:
        return [decode(f[b"e"], Event) for _, f in client.xrange(keys.events(ns))]
    finally:
        client.close()


@pytest.mark.parametrize(("cli", "name"), CAPTURED)
def test_every_captured_event_with_no_objection_prints_nothing_and_exits_zero(
    fleet: tuple[str, str], cli: str, name: str
) -> None:
    url, ns = fleet
    data = fixture(cli, name)
    code, out, err = run_hook(cli, data, url, ns)
    assert (code, out) == (0, None), err
    route = HARNESSES[cli].route(name)
    if route.mode == "publish":
        published = [e for e in _events(url, ns) if e.meta.get("event_name") == name]
        assert published, f"{name} did not reach the event stream"
        assert published[-1].kind == route.kind
        assert published[-1].session_id == data["session_id"]


def test_gemini_before_tool_deny_reaches_gemini_word_for_word(fleet: tuple[str, str]) -> None:
    url, ns = fleet
    data = fixture("gemini-cli", "BeforeTool", tool_input={"command": "HOOKBUS_DENY"})
    code, out, _ = run_hook("gemini-cli", data, url, ns)
    reason = f"denied by the fleet: PreToolUse of {data['session_id']}"
    assert (code, out) == (0, {"decision": "deny", "reason": reason})


def test_gemini_prompt_stop_and_session_start_answers(fleet: tuple[str, str]) -> None:
    url, ns = fleet
    sid = fixture("gemini-cli", "BeforeAgent")["session_id"]
    _, out, _ = run_hook(
        "gemini-cli", fixture("gemini-cli", "BeforeAgent", prompt="HOOKBUS_DENY"), url, ns
    )
    assert out == {"decision": "deny", "reason": f"denied by the fleet: PromptSubmit of {sid}"}
    _, out, _ = run_hook(
        "gemini-cli", fixture("gemini-cli", "AfterAgent", prompt_response="HOOKBUS_DENY"), url, ns
    )
    assert out == {"decision": "deny", "reason": f"denied by the fleet: Stop of {sid}"}
    _, out, _ = run_hook(
        "gemini-cli", fixture("gemini-cli", "SessionStart", source="HOOKBUS_CONTEXT"), url, ns
    )
    assert out == {
        "hookSpecificOutput": {
            "hookEventName": "SessionStart",
            "additionalContext": f"context from the fleet for SessionStart of {sid}",
        }
    }


def test_codex_answers_in_its_exact_forms(fleet: tuple[str, str]) -> None:
    url, ns = fleet
    sid = fixture("codex", "PreToolUse")["session_id"]
    _, out, _ = run_hook(
        "codex", fixture("codex", "PreToolUse", tool_input={"command": "HOOKBUS_DENY"}), url, ns
    )
    assert out == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": f"denied by the fleet: PreToolUse of {sid}",
        }
    }
    _, out, _ = run_hook(
        "codex", fixture("codex", "UserPromptSubmit", prompt="HOOKBUS_DENY"), url, ns
    )
    assert out == {"decision": "block", "reason": f"denied by the fleet: PromptSubmit of {sid}"}
    _, out, _ = run_hook(
        "codex", fixture("codex", "Stop", last_assistant_message="HOOKBUS_DENY"), url, ns
    )
    assert out == {"decision": "block", "reason": f"denied by the fleet: Stop of {sid}"}
    _, out, _ = run_hook(
        "codex", fixture("codex", "UserPromptSubmit", prompt="HOOKBUS_CONTEXT"), url, ns
    )
    assert out == {
        "hookSpecificOutput": {
            "hookEventName": "UserPromptSubmit",
            "additionalContext": f"context from the fleet for PromptSubmit of {sid}",
        }
    }


def test_copilot_and_qwen_answer_in_their_exact_forms(fleet: tuple[str, str]) -> None:
    url, ns = fleet
    sid = fixture("copilot", "PreToolUse")["session_id"]
    deny = {"command": "HOOKBUS_DENY"}
    _, out, _ = run_hook("copilot", fixture("copilot", "PreToolUse", tool_input=deny), url, ns)
    assert out == {
        "permissionDecision": "deny",
        "permissionDecisionReason": f"denied by the fleet: PreToolUse of {sid}",
    }
    # Copilot CLI's own camelCase shape of PermissionRequest, normalised by the row
    _, out, _ = run_hook(
        "copilot", fixture("copilot", "PermissionRequest", toolInput=deny), url, ns
    )
    sid = fixture("copilot", "PermissionRequest")["sessionId"]
    assert out == {
        "behavior": "deny",
        "message": f"denied by the fleet: PermissionRequest of {sid}",
    }
    sid = fixture("qwen-code", "PreToolUse")["session_id"]
    _, out, _ = run_hook("qwen-code", fixture("qwen-code", "PreToolUse", tool_input=deny), url, ns)
    assert out == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": f"denied by the fleet: PreToolUse of {sid}",
        }
    }


@pytest.fixture
def gateway(fleet: tuple[str, str]) -> Iterator[TestClient]:
    url, ns = fleet
    with TestClient(create_app(Settings(redis_url=url, namespace=ns))) as client:
        yield client


@pytest.mark.parametrize(
    ("cli", "name", "changes"),
    [
        ("gemini-cli", "BeforeTool", {"tool_input": {"command": "HOOKBUS_DENY"}}),
        ("gemini-cli", "BeforeAgent", {"prompt": "HOOKBUS_CONTEXT"}),
        ("gemini-cli", "AfterTool", {}),
        ("codex", "PreToolUse", {"tool_input": {"command": "HOOKBUS_DENY"}}),
        ("codex", "Stop", {"last_assistant_message": "HOOKBUS_DENY"}),
        ("codex", "PostToolUse", {}),
        ("copilot", "PreToolUse", {"tool_input": {"command": "HOOKBUS_DENY"}}),
        ("copilot", "PermissionRequest", {"toolInput": {"command": "HOOKBUS_DENY"}}),
        ("qwen-code", "PreToolUse", {"tool_input": {"command": "HOOKBUS_DENY"}}),
        ("qwen-code", "PostToolUse", {}),
    ],
)
def test_the_gateway_paths_answer_with_the_same_json_as_the_command(
    gateway: TestClient, fleet: tuple[str, str], cli: str, name: str, changes: dict[str, Any]
) -> None:
    data = fixture(cli, name, **changes)
    response = gateway.post(f"/v1/hooks/{cli}", json=data)
    assert response.status_code == 200
    _, from_command, _ = run_hook(cli, data, *fleet)
    assert response.json() == (from_command or {})
