"""The real Claude Agent SDK (PyPI ``claude-agent-sdk``) driving the real Claude Code
binary, offline, guarded by the fleet through
:func:`~hookbus.integrations.claude_agent_sdk.hooks`.

The binary is the one the Claude Code tests pin (:mod:`tests.integration.agent_clis`),
given to the SDK as ``cli_path``; its model is the local fake of the Messages API
(:mod:`tests.integration.fake_anthropic`), asked for one Bash call per session. No settings
file is read (``setting_sources=[]``), so the SDK's callbacks are the only hooks. A chain
worker serves the example hooks (block-destructive refuses mkfs).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import claude_agent_sdk
import pytest
import redis

from hookbus.integrations.claude_agent_sdk import hooks, sdk_events
from hookbus.integrations.fleet import Fleet
from tests.agent_cli_helpers import after_tool_events, cli_binary, last_deny
from tests.agent_sdk_helpers import (
    GUARDED,
    HARMLESS,
    LONG_DEADLINE_MS,
    UNAVAILABLE,
    UNREACHABLE,
    fleet_at,
    loop_watch,
    project_with_disk,
    silent_redis,
    untouched,
)
from tests.claude_code_helpers import free_gateway_port, gateway_env, running_gateway
from tests.integration.fake_anthropic import FakeModel, serve

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def claude_bin() -> Path:
    return cli_binary("claude")


@pytest.fixture(autouse=True)
def no_caller_claude_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK hands the CLI this process's environment: none of the caller's own Claude
    Code or Anthropic settings may reach it."""
    for name in list(os.environ):
        if name.startswith(("CLAUDE", "ANTHROPIC_")):
            monkeypatch.delenv(name)


def _options(
    claude: Path, project: Path, url: str, fleet: Fleet
) -> claude_agent_sdk.ClaudeAgentOptions:
    home = project.parent / "home"
    home.mkdir(exist_ok=True)
    return claude_agent_sdk.ClaudeAgentOptions(
        cwd=project,
        cli_path=claude,
        setting_sources=[],
        allowed_tools=["Bash"],
        model="claude-sonnet-4-5",
        max_turns=4,
        hooks=hooks(fleet),
        env={
            "HOME": str(home),
            "ANTHROPIC_BASE_URL": url,
            "ANTHROPIC_API_KEY": "sk-ant-fake-key-for-tests",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "CLAUDE_CODE_MAX_RETRIES": "1",
        },
    )


async def _session(
    claude: Path, project: Path, fleet: Fleet, command: str
) -> tuple[FakeModel, claude_agent_sdk.ResultMessage]:
    """One session whose model asks for ``command``: the fake, and the session's result."""
    model = FakeModel([("Bash", {"command": command, "description": "run it"})])
    results: list[claude_agent_sdk.ResultMessage] = []
    with serve(model) as url:
        options = _options(claude, project, url, fleet)
        async for message in claude_agent_sdk.query(prompt="run the command", options=options):
            if isinstance(message, claude_agent_sdk.ResultMessage):
                results.append(message)
    await fleet.aclose()
    (result,) = results
    return model, result


def _run(claude: Path, project: Path, fleet: Fleet, command: str) -> tuple[FakeModel, Any]:
    return asyncio.run(_session(claude, project, fleet, command))


def test_hooks_register_every_event_the_sdk_and_claude_code_share_guards_blocking() -> None:
    matchers = hooks(Fleet(agent_id="x"))
    assert set(matchers) == set(sdk_events())
    for name, (matcher,) in matchers.items():
        guard = name in ("PreToolUse", "PermissionRequest")
        assert matcher.on_failure == ("block" if guard else None), name
        assert matcher.matcher is None


def test_an_event_the_sdk_cannot_register_is_refused_naming_the_ones_it_can() -> None:
    with pytest.raises(ValueError, match="no hook event SessionEnd; it has PreToolUse"):
        hooks(Fleet(), events=["PreToolUse", "SessionEnd"])


def test_the_fleet_refuses_a_guarded_call_and_a_harmless_one_runs(
    claude_bin: Path,
    real_redis_url: str,
    real_redis: redis.Redis,
    namespace: str,
    chain_worker: None,
    tmp_path: Path,
) -> None:
    project = project_with_disk(tmp_path)
    fleet = fleet_at(real_redis_url, namespace)
    model, result = _run(claude_bin, project, fleet, GUARDED)
    reason = last_deny(real_redis, namespace)
    assert "mkfs" in reason
    (text,) = model.result_texts()
    assert reason in text  # the model reads the fleet's reason word for word
    assert [d["tool_input"]["command"] for d in result.permission_denials] == [GUARDED]
    assert untouched(project)

    model, result = _run(claude_bin, project, fleet, HARMLESS)
    (text,) = model.result_texts()
    assert "disk.img" in text  # ls ran
    assert result.permission_denials == []
    (after,) = after_tool_events(real_redis, namespace)
    assert after.payload["tool_input"]["command"] == HARMLESS
    assert after.session_id == result.session_id
    assert after.agent_id == "sdk-test"
    assert after.meta["harness"] == "claude-code"


def test_with_the_fleet_down_a_guarded_call_is_still_refused(
    claude_bin: Path, namespace: str, tmp_path: Path
) -> None:
    project = project_with_disk(tmp_path)
    model, result = _run(claude_bin, project, fleet_at(UNREACHABLE, namespace), GUARDED)
    (text,) = model.result_texts()
    assert UNAVAILABLE in text
    assert len(result.permission_denials) == 1
    assert untouched(project)


def test_a_fleet_that_never_answers_is_refused_in_time_without_holding_the_loop(
    claude_bin: Path, namespace: str, tmp_path: Path
) -> None:
    project = project_with_disk(tmp_path)

    async def watched(fleet: Fleet) -> tuple[FakeModel, Any, float]:
        async with loop_watch() as watch:
            model, result = await _session(claude_bin, project, fleet, GUARDED)
        return model, result, watch.longest_gap_s

    with silent_redis() as url:
        fleet = fleet_at(url, namespace, timeout_s=6, deadline_ms=LONG_DEADLINE_MS)
        started = time.monotonic()
        model, result, longest_gap_s = asyncio.run(watched(fleet))
        took = time.monotonic() - started
    (text,) = model.result_texts()
    assert UNAVAILABLE in text
    assert len(result.permission_denials) == 1
    assert took >= LONG_DEADLINE_MS / 1000  # the callback did wait for the fleet's deadline
    assert longest_gap_s < 1.0  # the SDK's loop was never held while the callback waited
    assert untouched(project)


def test_through_the_gateway_with_a_token_the_fleet_refuses_and_allows_as_in_process(
    claude_bin: Path,
    real_redis_url: str,
    real_redis: redis.Redis,
    namespace: str,
    chain_worker: None,
    tmp_path: Path,
) -> None:
    project = project_with_disk(tmp_path)
    env = dict(gateway_env(real_redis_url, namespace, tmp_path), HOOKBUS_GATEWAY_TOKEN="s3cret")
    with running_gateway(env) as url:
        model, result = _run(claude_bin, project, Fleet(gateway_url=url, token="s3cret"), GUARDED)
        (text,) = model.result_texts()
        assert last_deny(real_redis, namespace) in text
        assert len(result.permission_denials) == 1
        model, result = _run(claude_bin, project, Fleet(gateway_url=url, token="s3cret"), HARMLESS)
        assert "disk.img" in model.result_texts()[0]
        assert result.permission_denials == []
        # a wrong token: the gateway refuses it, and the guarded call is refused too
        model, result = _run(claude_bin, project, Fleet(gateway_url=url, token="wrong"), GUARDED)
        (text,) = model.result_texts()
        assert f"{UNAVAILABLE}the gateway at {url} refused this agent's token)" in text
    assert untouched(project)


def test_with_the_gateway_down_a_guarded_call_is_still_refused(
    claude_bin: Path, tmp_path: Path
) -> None:
    project = project_with_disk(tmp_path)
    url = f"http://127.0.0.1:{free_gateway_port()}"
    model, result = _run(claude_bin, project, Fleet(gateway_url=url), GUARDED)
    (text,) = model.result_texts()
    assert f"{UNAVAILABLE}the gateway at {url} did not answer: ConnectError" in text
    assert len(result.permission_denials) == 1
    assert untouched(project)


def test_claude_code_runs_the_input_the_fleet_rewrote(
    claude_bin: Path, fleet: tuple[str, str], tmp_path: Path
) -> None:
    """The scripted worker rewrites a marked command to ``ls -la``
    (tests/claude_code_helpers)."""
    url, ns = fleet
    project = project_with_disk(tmp_path)
    model, _ = _run(claude_bin, project, fleet_at(url, ns), "echo HOOKBUS_REWRITE > ran.txt")
    (text,) = model.result_texts()
    assert text.startswith("total ")  # the fleet's `ls -la` ran instead
    assert not (project / "ran.txt").exists()
