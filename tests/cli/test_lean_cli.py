"""The lean commands (``hookbus --version``, a plain ``hookbus publish``) answer exactly as
the typer commands do, and hand everything they do not cover to the typer app."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from hookbus.bus import eventlog, keys
from hookbus.bus.settings.loader import load_settings
from hookbus.bus.wire import Decision, Event, decode

HOOKBUS = str(Path(sys.executable).with_name("hookbus"))
UNREACHABLE = "redis://127.0.0.1:1/0"


def run(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    base.update(env or {})
    return subprocess.run(
        [HOOKBUS, *args], capture_output=True, text=True, cwd=cwd, env=base, input=stdin, timeout=60
    )


def test_main_dispatches_the_table_and_falls_back_to_typer(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import hookbus.cli as cli

    seen: list[tuple[list[str], dict[str, object]]] = []

    def lean(args: list[str], options: dict[str, object]) -> int | None:
        seen.append((args, options))
        return None if "--fall-back" in args else 7

    monkeypatch.setitem(sys.modules, "fake_lean", type(sys)("fake_lean"))
    monkeypatch.setattr(sys.modules["fake_lean"], "handler", lean, raising=False)
    monkeypatch.setattr(cli, "_LEAN", ((("fake-lean", "go"), "fake_lean:handler"),))
    with pytest.raises(SystemExit) as done:
        cli.main(["--json", "-n", "ns", "--redis-url=redis://x", "fake-lean", "go", "-x"])
    assert done.value.code == 7
    assert seen == [(["-x"], {"json": True, "namespace": "ns", "redis_url": "redis://x"})]
    with pytest.raises(SystemExit) as done:  # the typer app: no such command
        cli.main(["fake-lean", "go", "--fall-back"])
    assert done.value.code == 64
    assert "No such command" in capsys.readouterr().err


@pytest.mark.integration
def test_a_lean_publish_stores_what_the_library_stores(
    tmp_path: Path, real_redis: redis.Redis, real_redis_url: str, namespace: str
) -> None:
    out = run(
        "--redis-url",
        real_redis_url,
        "-n",
        namespace,
        "publish",
        "after_tool_call",
        "--payload",
        '{"tool_name": "Bash"}',
        "--session=s1",
        "--agent",
        "a1",
        "--json",
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    [(entry_id, fields)] = real_redis.xrange(keys.events(namespace))
    stored = decode(fields[b"e"], Event)
    assert answer == {"event_id": stored.id, "entry_id": entry_id.decode(), "kind": "PostToolUse"}
    settings = load_settings(environ={}, cwd=tmp_path).settings
    assert fields[b"e"] == eventlog.prepare(settings, stored)
    assert (stored.kind, stored.session_id, stored.agent_id) == ("PostToolUse", "s1", "a1")
    assert stored.payload == {"tool_name": "Bash"}
    assert stored.caller.source == "manual_cli"


@pytest.mark.integration
def test_a_lean_publish_reads_the_payload_from_stdin(
    tmp_path: Path, real_redis: redis.Redis, real_redis_url: str, namespace: str
) -> None:
    args = ("--redis-url", real_redis_url, "-n", namespace, "publish", "Stop", "-p", "-")
    out = run(*args, cwd=tmp_path, stdin='{"reason": "done"}')
    assert out.returncode == 0, out.stderr
    [(_, fields)] = real_redis.xrange(keys.events(namespace))
    assert decode(fields[b"e"], Event).payload == {"reason": "done"}
    assert out.stdout.strip() == decode(fields[b"e"], Event).id


def test_a_lean_publish_with_redis_unreachable_exits_69_with_one_line(tmp_path: Path) -> None:
    out = run("--redis-url", UNREACHABLE, "publish", "Stop", "--json", cwd=tmp_path)
    assert out.returncode == 69
    assert out.stderr.startswith(f"error: cannot reach Redis at {UNREACHABLE}")
    assert len(out.stderr.strip().splitlines()) == 1
    assert json.loads(out.stdout)["ok"] is False


def test_a_lean_publish_with_a_bad_setting_exits_78_naming_the_variable(tmp_path: Path) -> None:
    env = {"HOOKBUS_STREAMS__EVENTS_MAXLEN": "many"}
    out = run("--redis-url", UNREACHABLE, "publish", "Stop", cwd=tmp_path, env=env)
    assert out.returncode == 78
    assert "HOOKBUS_STREAMS__EVENTS_MAXLEN='many': expected an integer >= 1" in out.stderr


def test_a_lean_publish_of_bad_input_exits_1_without_sending(tmp_path: Path) -> None:
    out = run("--redis-url", UNREACHABLE, "publish", "Stop", "-p", "[1]", cwd=tmp_path)
    assert out.returncode == 1
    expected = 'error: --payload must be a JSON object, like \'{"tool_name": "Bash"}\'\n'
    assert out.stderr == expected
    out = run("--redis-url", UNREACHABLE, "publish", "NoSuchKind", cwd=tmp_path)
    assert out.returncode == 1
    assert "unknown event kind 'NoSuchKind'" in out.stderr


def test_a_lean_publish_checks_the_payload_as_the_sdk_does(tmp_path: Path) -> None:
    huge = '{"n": 123456789012345678901234567890}'
    out = run("--redis-url", UNREACHABLE, "publish", "Stop", "-p", huge, cwd=tmp_path)
    assert out.returncode == 1
    assert out.stderr.startswith("error: invalid event payload: the integer at $.n")
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    "args",
    [["publish", "--help"], ["publish", "Stop", "--wait", "--help"], ["publish", "-f", "x", "-h"]],
)
def test_what_the_lean_publish_does_not_cover_goes_to_typer(args: list[str]) -> None:
    out = run(*args)
    assert "Usage: hookbus publish" in out.stdout + out.stderr


def test_publish_without_a_kind_is_a_usage_error() -> None:
    out = run("--redis-url", UNREACHABLE, "publish")
    assert out.returncode == 64
    assert "give an event KIND" in out.stderr


def test_wait_json_always_carries_outcome_and_degraded(capsys: pytest.CaptureFixture[str]) -> None:
    from hookbus.cli.publish import _print_decision

    _print_decision(Decision(), as_json=True)  # every field at its default: omitted on the wire
    data = json.loads(capsys.readouterr().out)
    assert data["outcome"] == "allow"
    assert data["degraded"] is False
