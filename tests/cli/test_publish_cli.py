"""``hookbus publish`` through typer's CliRunner, on the real server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import typer
from typer.testing import CliRunner

from hookbus.bus import keys
from hookbus.bus.wire import Event, decode
from hookbus.cli import publish as publish_cli

app = typer.Typer()
app.command("publish")(publish_cli.publish)
app.command("noop")(lambda: None)  # keep "publish" a sub-command, as under the root app


@pytest.fixture
def cli(real_redis: redis.Redis, real_redis_url: str, namespace: str) -> Iterator[Any]:
    runner = CliRunner()
    env = {"HOOKBUS_REDIS_URL": real_redis_url, "HOOKBUS_NAMESPACE": namespace}

    def invoke(*args: str, input: str | None = None) -> Any:
        return runner.invoke(app, ["publish", *args], env=env, input=input)

    yield invoke


def _stored(client: redis.Redis, ns: str) -> list[Event]:
    return [decode(f[b"e"], Event) for _, f in client.xrange(keys.events(ns))]


def test_publish_prints_the_event_id_and_appends_the_event(
    cli: Any, real_redis: redis.Redis, namespace: str
) -> None:
    out = cli(
        "after_tool_call",
        "--payload",
        '{"tool_name": "Bash", "duration_ms": 12}',
        "--session",
        "s1",
        "--agent",
        "a1",
    )
    assert out.exit_code == 0, out.output
    [event] = _stored(real_redis, namespace)
    assert out.stdout.strip() == event.id
    assert event.kind == "PostToolUse"
    assert event.payload == {"tool_name": "Bash", "duration_ms": 12}
    assert (event.session_id, event.agent_id) == ("s1", "a1")
    assert event.caller.source == "manual_cli"


def test_publish_reads_the_payload_from_stdin_and_answers_json(
    cli: Any, real_redis: redis.Redis, namespace: str
) -> None:
    out = cli("Stop", "--payload", "-", "--json", input='{"reason": "done"}')
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    [event] = _stored(real_redis, namespace)
    assert data["event_id"] == event.id
    assert data["entry_id"] == real_redis.xrange(keys.events(namespace))[0][0].decode()
    assert event.payload == {"reason": "done"}


def test_bad_payloads_and_unknown_kinds_exit_1_without_publishing(
    cli: Any, real_redis: redis.Redis, namespace: str
) -> None:
    assert cli("Stop", "--payload", "{not json").exit_code == 1
    assert cli("Stop", "--payload", "[1, 2]").exit_code == 1
    unknown = cli("NoSuchKind")
    assert unknown.exit_code == 1
    assert "unknown event kind" in str(unknown.exception) or "unknown" in unknown.output
    assert real_redis.exists(keys.events(namespace)) == 0


def test_publish_file_sends_every_line_and_refuses_a_file_with_a_bad_line(
    cli: Any, real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    good = tmp_path / "events.jsonl"
    lines = [json.dumps({"kind": "PostToolUse", "payload": {"i": i}}) for i in range(1200)]
    lines.insert(3, "")
    lines.append(json.dumps({"payload": {"default": True}}))  # takes KIND from the argument
    good.write_text("\n".join(lines) + "\n")
    out = cli("Notification", "--file", str(good), "--json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["published"] == 1201
    stored = _stored(real_redis, namespace)
    assert len(stored) == 1201
    assert [e.payload.get("i") for e in stored[:1200]] == list(range(1200))
    assert stored[-1].kind == "Notification"

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"kind": "Stop"}) + "\n" + "oops\n")
    out = cli("--file", str(bad))
    assert out.exit_code == 1
    assert "bad.jsonl:2" in out.output
    assert len(_stored(real_redis, namespace)) == 1201


def test_wait_with_no_chain_worker_prints_the_policy_decision_and_its_exit_code(
    cli: Any, real_redis: redis.Redis, namespace: str
) -> None:
    denied = cli(
        "PreToolUse",
        "--payload",
        '{"tool_name": "Bash"}',
        "--wait",
        "--json",
        "--deadline-ms",
        "200",
    )
    assert denied.exit_code == 2, denied.output
    decision = json.loads(denied.stdout)
    assert decision["outcome"] == "deny" and decision["degraded"] is True
    allowed = cli("PromptSubmit", "--wait", "--deadline-ms", "200")
    assert allowed.exit_code == 0, allowed.output
    assert "allow" in allowed.stdout and "degraded" in allowed.stdout


def test_wait_with_redis_unreachable_prints_the_policy_answer_and_exits_69_not_the_deny_code(
    tmp_path: Path,
) -> None:
    env = {"HOOKBUS_REDIS_URL": "redis://127.0.0.1:1/0", "HOOKBUS_NAMESPACE": "unreachable"}
    payload = '{"tool_name": "Bash", "tool_input": {"command": "ls"}}'
    out = CliRunner().invoke(
        app, ["publish", "PreToolUse", "--payload", payload, "--wait", "--json"], env=env
    )
    assert out.exit_code == 69, out.output
    decision = json.loads(out.stdout)
    assert decision["outcome"] == "deny" and decision["degraded"] is True
    assert "Redis unreachable" in decision["reason"]


def test_an_unknown_kind_near_a_known_one_gets_a_did_you_mean(cli: Any) -> None:
    typo = cli("PreToolUze")
    assert typo.exit_code == 1
    assert "did you mean 'PreToolUse'?" in str(typo.exception) + typo.output
    far = cli("Zzzzzz")
    assert "did you mean" not in str(far.exception) + far.output
