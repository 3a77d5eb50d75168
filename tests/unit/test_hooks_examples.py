"""Every example in examples/hooks loads cleanly and does what its README says."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from hookbus.bus.wire import Event
from hookbus.hooks.loader import load_hooks
from hookbus.hooks.registry import HookRegistry

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "hooks"


@pytest.fixture(scope="module")
def registry() -> Iterator[HookRegistry]:
    report = load_hooks(EXAMPLES)
    assert report.ok, [str(p) for p in report.problems]
    hooks = HookRegistry()
    assert hooks.replace_dynamic(report.hooks, version="examples") == []
    yield hooks
    hooks.close()


def test_all_nine_examples_load_in_three_forms() -> None:
    report = load_hooks(EXAMPLES)
    assert sorted((h.name, h.form) for h in report.hooks) == [
        ("block-destructive", "toml"),
        ("deploy-lock", "toml"),
        ("destructive-budget", "toml"),
        ("policy-reminder", "toml"),
        ("routing-hint", "toml"),
        ("secret-file-guard", "markdown"),
        ("slow-call-logger", "yaml"),
        ("telemetry", "toml"),
        ("three-strikes", "toml"),
    ]


def bash(command: str) -> Event:
    return Event(
        kind="PreToolUse", payload={"tool_name": "Bash", "tool_input": {"command": command}}
    )


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf /",
        "sudo rm -rf / --no-preserve-root",
        "rm -fr ~",
        "rm -r -f *",
        "mkfs.ext4 /dev/sda1",
        "dd if=/dev/zero of=/dev/sda bs=1M",
    ],
)
def test_the_guard_denies_destructive_commands_with_exit_2(
    registry: HookRegistry, command: str
) -> None:
    decision = registry.run(bash(command))
    assert decision.outcome == "deny", decision
    assert decision.reason is not None and decision.reason.startswith("refused")
    assert decision.trace[0].hook_id == "block-destructive"


@pytest.mark.parametrize(
    "tool_input",
    [
        {"command": "rm -rf /\x00"},  # a shell reads its command up to the NUL
        {"command": "rm -rf /\x00 && echo done"},
        {"command": ["rm", "-rf", "/"]},  # an argv list (Codex's shell tool sends one)
        {"command": ["bash", "-lc", "rm -rf ~"]},
        {"command": ["rm", "-rf", 7]},  # a list it cannot read as a command line
        "rm -rf /",  # tool_input itself a string
        '{"command": "rm -rf /"}',  # or the JSON text of the object
    ],
)
def test_the_guard_denies_a_destructive_command_in_any_shape_it_arrives(
    registry: HookRegistry, tool_input: object
) -> None:
    event = Event(kind="PreToolUse", payload={"tool_name": "Bash", "tool_input": tool_input})
    decision = registry.run(event)
    assert decision.outcome == "deny", (tool_input, decision)
    assert decision.reason is not None and decision.reason.startswith("refused")


@pytest.mark.parametrize(
    "tool_input", [{"command": ["ls", "-la"]}, "git status", {"command": ["rm", "-rf", "build"]}]
)
def test_the_guard_allows_ordinary_commands_in_any_shape(
    registry: HookRegistry, tool_input: object
) -> None:
    event = Event(kind="PreToolUse", payload={"tool_name": "Bash", "tool_input": tool_input})
    assert registry.run(event).outcome == "allow"


@pytest.mark.parametrize("command", ["ls -la", "rm -rf ./build", "rm notes.txt", "git status"])
def test_the_guard_allows_ordinary_commands(registry: HookRegistry, command: str) -> None:
    assert registry.run(bash(command)).outcome == "allow"


def test_the_guard_only_looks_at_bash(registry: HookRegistry) -> None:
    event = Event(
        kind="PreToolUse", payload={"tool_name": "Write", "tool_input": {"content": "rm -rf /"}}
    )
    assert "block-destructive" not in [h.id for h in registry.matching(event)]


def test_the_microclaw_hook_blocks_secret_files_through_exit_1(registry: HookRegistry) -> None:
    event = Event(
        kind="BeforeToolCall",
        payload={"tool_name": "Read", "tool_input": {"file_path": "/app/.env"}},
    )
    decision = registry.run(event)
    assert decision.outcome == "deny"
    assert "secret file" in (decision.reason or "")
    assert (
        registry.run(
            Event(
                kind="PreToolUse",
                payload={"tool_name": "Read", "tool_input": {"file_path": "/app/main.py"}},
            )
        ).outcome
        == "allow"
    )


def test_routing_hints_and_the_policy_reminder_shape_a_prompt(registry: HookRegistry) -> None:
    decision = registry.run(
        Event(kind="UserPromptSubmit", payload={"prompt": "please refactor this and run the tests"})
    )
    assert decision.outcome == "allow"
    [signal] = decision.signals
    assert signal.kind == "routing_hint"
    assert [a["id"] for a in signal.payload["suggested_abilities"]] == [
        "refactor_code",
        "run_tests",
    ]
    assert len(decision.context) == 1 and decision.context[0].startswith("Project rules")
    quiet = registry.run(Event(kind="PromptSubmit", payload={"prompt": "hello"}))
    assert quiet.signals == []


def test_telemetry_appends_one_json_line_per_tool_call(
    registry: HookRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "telemetry.jsonl"
    monkeypatch.setenv("HOOKBUS_TELEMETRY_FILE", str(target))
    for tool in ("Bash", "Read"):
        event = Event(
            kind="PostToolUse",
            session_id="s1",
            payload={"tool_name": tool, "duration_ms": 12, "status": "success"},
        )
        assert "telemetry" in [h.id for h in registry.matching(event)]
        run = registry.run_hook("telemetry", event)
        assert run.outcome == "continue"
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert [line["tool_name"] for line in lines] == ["Bash", "Read"]
    assert lines[0]["session_id"] == "s1" and lines[0]["duration_ms"] == 12


def test_telemetry_defaults_to_the_system_temp_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import tempfile

    monkeypatch.delenv("HOOKBUS_TELEMETRY_FILE", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "telemetry_example", EXAMPLES / "telemetry" / "telemetry.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.telemetry_path() == tmp_path / "hookbus-telemetry.jsonl"


def test_the_yaml_hook_logs_only_slow_calls(
    registry: HookRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    fast = Event(kind="PostAbilityCall", payload={"ability_id": "edit_file", "duration_ms": 5})
    slow = Event(kind="PostAbilityCall", payload={"ability_id": "edit_file", "duration_ms": 2500})
    assert "slow-call-logger" not in [h.id for h in registry.matching(fast)]
    assert "slow-call-logger" in [h.id for h in registry.matching(slow)]
    assert registry.run_hook("slow-call-logger", slow).outcome == "continue"
    logged = (tmp_path / "hookbus-slow-calls.log").read_text()
    assert json.loads(logged.splitlines()[0])["payload"]["duration_ms"] == 2500


@pytest.mark.parametrize(
    ("tool_input", "tool", "says"),
    [
        ({"command": "rm -rf /"}, "Bash", "destructive"),
        ({"command": "cat deploy/prod.env"}, "Bash", "secret file"),
        ({"file_path": "/app/.env"}, "Read", "secret file"),
    ],
)
def test_the_guards_answer_a_permission_request_as_they_answer_a_tool_call(
    registry: HookRegistry, tool_input: dict[str, str], tool: str, says: str
) -> None:
    # a setup that installs only PermissionRequest (or where the CLI asks only there) is
    # still guarded: the dialog gets the fleet's deny, not the user's guess
    for kind in ("PreToolUse", "PermissionRequest"):
        event = Event(kind=kind, payload={"tool_name": tool, "tool_input": tool_input})
        decision = registry.run(event)
        assert decision.outcome == "deny", (kind, decision)
        assert says in (decision.reason or "")
    harmless = Event(
        kind="PermissionRequest", payload={"tool_name": "Bash", "tool_input": {"command": "ls"}}
    )
    assert registry.run(harmless).outcome == "allow"
