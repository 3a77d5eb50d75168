"""The real Claude Code binary, offline, on the fleet.

Claude Code (from the npm registry) runs headless (``claude -p``) against a local fake of
the Messages API (:mod:`tests.integration.fake_anthropic`) that asks for one Bash call per
session, after ``hookbus claude-code install`` wrote its hooks into a fresh ``$HOME``. A
chain worker serves the example hooks. In command and in http (gateway) mode:

* a guarded call (``cat deploy/prod.env``, refused by the example secret-file-guard) is
  blocked through the bus, and the fleet's reason, word for word, is what the model gets
  back as the tool result;
* a harmless call runs, and its PostToolUse reaches the event stream;
* with the bus unreachable (Redis down for the command, the gateway down for http, hookbus
  not even installed), a call is still blocked: the guards fail closed.

The calls are ones Claude Code itself would run (it refuses ``rm -rf ~/`` on its own, which
would prove nothing about hookbus).

The binary: ``$HOOKBUS_CLAUDE_BIN``, else the version pinned in
:mod:`tests.integration.agent_clis`, installed once with npm into its test cache. Where npm
or its registry cannot be reached these tests are skipped, saying why (the captured fixtures
in ``tests/fixtures/claude_code`` still prove the adapter); CI, which reaches the registry,
sets ``HOOKBUS_REQUIRE_AGENT_CLIS`` so that there they run or fail.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from hookbus.bus import keys
from hookbus.bus.wire import Event, decode
from tests.agent_cli_helpers import cli_binary
from tests.blocking_helpers import wait_for
from tests.claude_code_helpers import (
    HOOKBUS,
    ROOT,
    free_gateway_port,
    gateway_env,
    running_gateway,
    start_worker,
    stop_worker,
)
from tests.decision_log_helpers import last_deny
from tests.integration.fake_anthropic import FakeModel, serve

EXAMPLES = ROOT / "examples" / "hooks"
#: Headless, Bash allowed without a prompt (bypassPermissions is refused to root), a model
#: name the fake answers to.
CLAUDE_FLAGS = ("--allowedTools", "Bash", "--model", "claude-sonnet-4-5")
#: A call Claude Code runs on its own: it leaves ran.txt behind when no hook stops it.
TOUCH = "echo ran > ran.txt"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    binary = cli_binary("claude")
    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0, version.stderr
    return binary


def _install(home: Path, *args: str) -> None:
    done = subprocess.run(
        [*HOOKBUS, "claude-code", "install", "--scope", "user", *args],
        env=dict(os.environ, HOME=str(home), PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def _session(
    claude: Path,
    env: dict[str, str],
    project: Path,
    command: str | None,
    *,
    prompt: str = "run the command",
    final_text: str = "Noted.",
    flags: tuple[str, ...] = CLAUDE_FLAGS,
) -> tuple[FakeModel, Any]:
    """One headless session whose model asks for ``command`` (if any), then says
    ``final_text``; returns the fake (what the model was sent) and Claude's JSON result."""
    calls = [("Bash", {"command": command, "description": "run the command"})] if command else []
    model = FakeModel(calls, final_text=final_text)
    with serve(model) as url:
        done = subprocess.run(
            [str(claude), "-p", prompt, "--output-format", "json", *flags],
            env=dict(env, ANTHROPIC_BASE_URL=url),
            cwd=project,
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    return model, json.loads(done.stdout)


def _last_deny(client: redis.Redis, ns: str) -> str:
    return last_deny(client, ns)


def _post_tool_uses(client: redis.Redis, ns: str) -> list[Event]:
    events = [decode(f[b"e"], Event) for _, f in client.xrange(keys.events(ns))]
    return [e for e in events if e.kind == "PostToolUse"]


@pytest.mark.parametrize("mode", ["command", "http"])
def test_real_claude_code_is_guarded_by_the_fleet(
    mode: str,
    claude_bin: Path,
    real_redis_url: str,
    real_redis: redis.Redis,
    namespace: str,
    chain_worker: None,
    gateway: str,
    tmp_path: Path,
) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    _install(home, *(["--mode", "http", "--url", gateway] if mode == "http" else []))
    env = gateway_env(real_redis_url, namespace, home)
    (project / "deploy").mkdir()
    (project / "deploy" / "prod.env").write_text("DB_PASSWORD=hunter2\n")

    # a guarded call: blocked, and the model reads the fleet's reason word for word
    model, result = _session(claude_bin, env, project, "cat deploy/prod.env")
    reason = _last_deny(real_redis, namespace)
    assert reason.startswith("refused: the call touches a secret file (deploy/prod.env)")
    (text,) = model.result_texts()
    assert reason in text
    assert "hunter2" not in text
    assert [d["tool_input"]["command"] for d in result["permission_denials"]] == [
        "cat deploy/prod.env"
    ]

    # a harmless call runs, and its PostToolUse reaches the event stream
    model, result = _session(claude_bin, env, project, "echo hello-from-claude-code")
    (text,) = model.result_texts()
    assert "hello-from-claude-code" in text
    assert result["permission_denials"] == []
    after = _post_tool_uses(real_redis, namespace)
    assert [e.payload["tool_input"]["command"] for e in after] == ["echo hello-from-claude-code"]
    assert after[0].session_id == result["session_id"]


def test_real_claude_code_blocks_a_guarded_call_with_redis_unreachable(
    claude_bin: Path, tmp_path: Path
) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    _install(home)
    env = gateway_env("redis://127.0.0.1:1/0", "nowhere", home)
    model, result = _session(claude_bin, env, project, TOUCH)
    (text,) = model.result_texts()
    assert "hookbus is unavailable (cannot reach Redis at redis://127.0.0.1:1/0" in text
    assert len(result["permission_denials"]) == 1
    assert not (project / "ran.txt").exists()


def test_real_claude_code_blocks_a_guarded_call_with_the_gateway_down(
    claude_bin: Path, tmp_path: Path
) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    # nothing listens there: the http hook fails, and onFailure "block" blocks the call
    _install(home, "--mode", "http", "--url", f"http://127.0.0.1:{free_gateway_port()}")
    env = gateway_env("redis://127.0.0.1:1/0", "x", home)
    _, result = _session(claude_bin, env, project, TOUCH)
    assert len(result["permission_denials"]) == 1
    assert not (project / "ran.txt").exists()


def test_real_claude_code_blocks_a_guarded_call_when_hookbus_cannot_even_start(
    claude_bin: Path, tmp_path: Path
) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    _install(home, "--command", str(tmp_path / "no-such-hookbus"))
    env = gateway_env("redis://127.0.0.1:1/0", "x", home)
    _, result = _session(claude_bin, env, project, TOUCH)
    assert len(result["permission_denials"]) == 1
    assert not (project / "ran.txt").exists()


@pytest.fixture
def scripted_fleet(real_redis_url: str, real_redis: redis.Redis, namespace: str) -> Iterator[None]:
    """A worker whose answers the events select by markers (see test_claude_code_hook)."""
    proc = start_worker(real_redis_url, namespace)
    try:
        wait_for(lambda: real_redis.hlen(keys.workers(namespace)) > 0, what="a heartbeat")
        yield
    finally:
        stop_worker(proc)


def _home(tmp_path: Path) -> tuple[Path, Path]:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    _install(home)
    return home, project


def test_real_claude_code_runs_the_input_a_pre_tool_use_hook_rewrote(
    claude_bin: Path, real_redis_url: str, namespace: str, scripted_fleet: None, tmp_path: Path
) -> None:
    home, project = _home(tmp_path)
    env = gateway_env(real_redis_url, namespace, home)
    model, _ = _session(claude_bin, env, project, "echo HOOKBUS_REWRITE > ran.txt")
    (text,) = model.result_texts()
    assert text.startswith("total ")  # the fleet's `ls -la` ran instead
    assert not (project / "ran.txt").exists()


def test_real_claude_code_obeys_permission_request_deny_and_allow_with_new_input(
    claude_bin: Path, real_redis_url: str, namespace: str, scripted_fleet: None, tmp_path: Path
) -> None:
    home, project = _home(tmp_path)
    env = gateway_env(real_redis_url, namespace, home)
    no_rules = ("--model", "claude-sonnet-4-5")  # Bash may not run without asking
    marker = "# HOOKBUS_FOR_PermissionRequest"
    model, result = _session(
        claude_bin, env, project, f"touch denied.txt {marker} HOOKBUS_DENY", flags=no_rules
    )
    (text,) = model.result_texts()
    assert text.startswith("denied by the fleet: PermissionRequest of ")
    assert len(result["permission_denials"]) == 1
    assert not (project / "denied.txt").exists()
    model, result = _session(
        claude_bin, env, project, f"touch other.txt {marker} HOOKBUS_REWRITE", flags=no_rules
    )
    (text,) = model.result_texts()
    assert text.startswith("total ")  # allowed, as the fleet's `ls -la`
    assert result["permission_denials"] == []
    assert not (project / "other.txt").exists()


def test_real_claude_code_continues_after_a_blocked_stop_and_the_loop_ends(
    claude_bin: Path,
    real_redis_url: str,
    real_redis: redis.Redis,
    namespace: str,
    scripted_fleet: None,
    tmp_path: Path,
) -> None:
    home, project = _home(tmp_path)
    env = gateway_env(real_redis_url, namespace, home)
    model, result = _session(
        claude_bin, env, project, None, prompt="say hi", final_text="HOOKBUS_FOR_Stop HOOKBUS_DENY"
    )
    # the fleet blocked the first Stop: the model got its reason and answered once more;
    # the second Stop came with stop_hook_active and was let through without a request
    assert len(model.requests) == 2
    assert f"denied by the fleet: Stop of {result['session_id']}" in json.dumps(
        model.requests[1]["messages"][-1]
    )
    stops = [f for _, f in real_redis.xrange(keys.decisions(namespace)) if f[b"kind"] == b"Stop"]
    assert len(stops) == 1


def test_real_claude_code_drops_a_prompt_the_fleet_blocks(
    claude_bin: Path, real_redis_url: str, namespace: str, scripted_fleet: None, tmp_path: Path
) -> None:
    home, project = _home(tmp_path)
    env = gateway_env(real_redis_url, namespace, home)
    model, result = _session(claude_bin, env, project, None, prompt="HOOKBUS_DENY please")
    assert model.requests == []  # the prompt never reached the model
    assert f"denied by the fleet: PromptSubmit of {result['session_id']}" in result["result"]


def test_real_claude_code_sends_the_gateway_token_from_its_environment(
    claude_bin: Path,
    real_redis_url: str,
    namespace: str,
    chain_worker: None,
    tmp_path: Path,
) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    env = gateway_env(real_redis_url, namespace, home)
    with running_gateway(dict(env, HOOKBUS_GATEWAY_TOKEN="s3cret-token")) as url:
        _install(home, "--mode", "http", "--url", url, "--token-env", "HOOKBUS_GATEWAY_TOKEN")
        settings = (home / ".claude" / "settings.json").read_text()
        assert "s3cret-token" not in settings
        # the right token: the gateway answers (a harmless call runs)
        _session(claude_bin, dict(env, HOOKBUS_GATEWAY_TOKEN="s3cret-token"), project, TOUCH)
        assert (project / "ran.txt").exists()
        (project / "ran.txt").unlink()
        # a wrong token: 401, and the guard's onFailure blocks the call
        _, result = _session(claude_bin, dict(env, HOOKBUS_GATEWAY_TOKEN="wrong"), project, TOUCH)
        assert len(result["permission_denials"]) == 1
        assert not (project / "ran.txt").exists()


def test_real_claude_code_gives_the_model_the_context_hooks_add(
    claude_bin: Path, real_redis_url: str, namespace: str, scripted_fleet: None, tmp_path: Path
) -> None:
    home, project = _home(tmp_path)
    env = gateway_env(real_redis_url, namespace, home)
    model, result = _session(claude_bin, env, project, "echo HOOKBUS_CONTEXT")
    sid = result["session_id"]
    assert f"context from the fleet for PreToolUse of {sid}" in json.dumps(model.requests[-1])
    model, result = _session(claude_bin, env, project, None, prompt="HOOKBUS_CONTEXT please")
    sid = result["session_id"]
    assert f"context from the fleet for PromptSubmit of {sid}" in json.dumps(model.requests[0])


def test_real_claude_code_stops_the_session_when_the_fleet_halts(
    claude_bin: Path, real_redis_url: str, namespace: str, scripted_fleet: None, tmp_path: Path
) -> None:
    home, project = _home(tmp_path)
    env = gateway_env(real_redis_url, namespace, home)
    model, result = _session(claude_bin, env, project, "echo HOOKBUS_HALT > ran.txt")
    assert result["terminal_reason"] == "hook_stopped"
    assert len(model.requests) == 1  # no turn after the halted call
    assert not (project / "ran.txt").exists()


def _skill_session(claude: Path, env: dict[str, str], project: Path, command: str) -> str:
    """Run the project command ``/check``, whose text holds ``!`command``` (a skill's own
    shell command, run before the model is asked: Claude Code 2.1.332's PreSkillShellCommand);
    returns what the model was sent."""
    folder = project / ".claude" / "commands"
    folder.mkdir(parents=True, exist_ok=True)
    program = command.split()[0]
    (folder / "check.md").write_text(
        f"---\ndescription: a check\nallowed-tools: Bash({program}:*)\n---\n"
        f"Output: !`{command}`\n\nSay done.\n"
    )
    model = FakeModel([], final_text="done.")
    with serve(model) as url:
        done = subprocess.run(
            [str(claude), "-p", "/check", "--output-format", "json", *CLAUDE_FLAGS],
            env=dict(env, ANTHROPIC_BASE_URL=url),
            cwd=project,
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.dumps(model.requests)


def test_real_claude_code_asks_the_fleet_before_a_skills_shell_command_runs(
    claude_bin: Path,
    real_redis_url: str,
    real_redis: redis.Redis,
    namespace: str,
    chain_worker: None,
    tmp_path: Path,
) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    _install(home, "--events", "PreSkillShellCommand")
    env = gateway_env(real_redis_url, namespace, home)

    # the example block-destructive guard refuses it, as it would a Bash call
    sent = _skill_session(claude_bin, env, project, "mkfs.ext4 -q -F disk.img")
    reason = _last_deny(real_redis, namespace)
    assert "mkfs" in reason
    assert "not run: blocked by hook" in sent and json.dumps(reason)[1:-1] in sent
    assert not (project / "disk.img").exists()

    # a harmless one runs: the model gets its output
    assert "SKILL42RAN" in _skill_session(claude_bin, env, project, "echo SKILL$((40+2))RAN")

    # with Redis unreachable the guard still refuses it
    down = gateway_env("redis://127.0.0.1:1/0", "nowhere", home)
    sent = _skill_session(claude_bin, down, project, "echo SKILL$((40+2))RAN")
    assert "SKILL42RAN" not in sent
    assert "hookbus is unavailable (cannot reach Redis at redis://127.0.0.1:1/0" in sent
