"""``hookbus agents`` through typer's CliRunner, on the real server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import typer
from typer.testing import CliRunner

from hookbus.cli.agents import registry as agents_cli

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "supervisor" / "registry.json"

app = typer.Typer()
app.add_typer(agents_cli.app, name="agents")


@pytest.fixture
def cli(real_redis: redis.Redis, real_redis_url: str, namespace: str) -> Iterator[Any]:
    runner = CliRunner()
    env = {"HOOKBUS_REDIS_URL": real_redis_url, "HOOKBUS_NAMESPACE": namespace}

    def invoke(*args: str, input: str | None = None) -> Any:
        return runner.invoke(app, ["agents", *args], env=env, input=input)

    yield invoke


def test_import_then_export_prints_the_same_registry(cli: Any) -> None:
    out = cli("import", str(EXAMPLE))
    assert out.exit_code == 0, out.output
    assert "imported 3 agent(s)" in out.output
    exported = cli("export")
    assert exported.exit_code == 0
    assert json.loads(exported.stdout) == json.loads(EXAMPLE.read_text())


def test_show_json_prints_effective_values_and_their_tiers(cli: Any) -> None:
    cli("import", str(EXAMPLE))
    out = cli("show", "warden", "--json")
    assert out.exit_code == 0, out.output
    shown = json.loads(out.stdout)
    assert shown["effective"] == {
        "pane_capture_lines": 150,
        "context_pressure_threshold": 50,
        "autocompact_pct": 50,
        "hook_mode": "bidirectional",
    }
    assert shown["source"] == {
        "pane_capture_lines": "agent",
        "context_pressure_threshold": "global",
        "autocompact_pct": "global",
        "hook_mode": "agent",
    }


def test_set_changes_one_agent_and_set_global_the_middle_tier(cli: Any) -> None:
    assert cli("set", "a1", "tmux_session_name=s1", "pane_capture_lines=40").exit_code == 0
    assert cli("set-global", "context_pressure_threshold=65").exit_code == 0
    shown = json.loads(cli("show", "a1", "--json").stdout)
    assert shown["effective"]["pane_capture_lines"] == 40
    assert shown["source"]["context_pressure_threshold"] == "global"
    assert shown["effective"]["context_pressure_threshold"] == 65
    assert shown["source"]["hook_mode"] == "default"
    listed = json.loads(cli("list", "--json").stdout)
    assert [a["agent_id"] for a in listed["agents"]] == ["a1"]
    assert listed["agents"][0]["tmux_session_name"] == "s1"


def test_an_unknown_key_is_refused_with_its_name_and_exit_1(cli: Any) -> None:
    cli("set", "a1", "tmux_session_name=s1")
    out = cli("set", "a1", "system_prompt=new", "pane_lines=3")
    assert out.exit_code == 1
    assert "pane_lines" in out.output
    shown = json.loads(cli("show", "a1", "--json").stdout)
    assert "system_prompt" not in shown["agent"]


def test_show_of_an_unknown_agent_exits_1(cli: Any) -> None:
    out = cli("show", "nobody")
    assert out.exit_code == 1
    assert "no agent 'nobody'" in out.output


def test_import_from_stdin_remove_and_unset(cli: Any) -> None:
    out = cli("import", "-", input=EXAMPLE.read_text())
    assert out.exit_code == 0, out.output
    assert cli("remove", "gideon").exit_code == 0
    listed = json.loads(cli("list", "--json").stdout)
    assert [a["agent_id"] for a in listed["agents"]] == ["forge", "warden"]
    assert cli("set", "warden", "--unset", "hook_mode").exit_code == 0
    shown = json.loads(cli("show", "warden", "--json").stdout)
    assert (shown["effective"]["hook_mode"], shown["source"]["hook_mode"]) == ("async", "global")
    assert cli("set-global", "--unset", "hook_mode").exit_code == 0
    shown = json.loads(cli("show", "warden", "--json").stdout)
    assert shown["source"]["hook_mode"] == "default"


def test_a_refused_import_exits_1_and_keeps_the_registry(cli: Any) -> None:
    cli("import", str(EXAMPLE))
    bad = json.loads(EXAMPLE.read_text())
    bad["agents"][0]["hook_settings"]["pane_capture_lines"] = "lots"
    out = cli("import", "-", input=json.dumps(bad))
    assert out.exit_code == 1
    assert "agents[0].hook_settings.pane_capture_lines" in out.output
    assert json.loads(cli("export").stdout) == json.loads(EXAMPLE.read_text())


def test_an_unreachable_redis_is_one_error_line_and_exit_1() -> None:
    runner = CliRunner()
    env = {"HOOKBUS_REDIS_URL": "redis://127.0.0.1:1/0", "HOOKBUS_NAMESPACE": "x"}
    out = runner.invoke(app, ["agents", "list"], env=env)
    assert out.exit_code == 1
    assert "cannot reach Redis" in out.output
    assert "Traceback" not in out.output
