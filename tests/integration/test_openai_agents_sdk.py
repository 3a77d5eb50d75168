"""The real OpenAI Agents SDK (PyPI ``openai-agents``), offline, guarded by the fleet.

An agent whose one function tool runs shell commands, the fleet's
:func:`~hookbus.integrations.openai_agents.tool_input_guardrail` on it and
:class:`~hookbus.integrations.openai_agents.FleetRunHooks` on the run, talks to a local fake
of the Chat Completions API (:mod:`tests.integration.fake_openai_chat`) that asks for one
shell call. A chain worker serves the example hooks (block-destructive refuses mkfs).
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path
from typing import Any

import agents
import pytest
import redis
from openai import AsyncOpenAI

from hookbus.bus import keys
from hookbus.bus.wire import Event, decode
from hookbus.integrations.fleet import Fleet
from hookbus.integrations.openai_agents import FleetRunHooks, OnDeny, tool_input_guardrail
from tests.agent_cli_helpers import after_tool_events, last_deny
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
from tests.blocking_helpers import wait_for
from tests.integration.fake_openai_chat import FakeChatModel, serve
from tests.unguarded_helpers import dev_fleet, status_json

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: The program's own tool name, mapped to the canonical one the example guards match.
TOOLS = {"shell": "Bash"}


@pytest.fixture(autouse=True)
def no_tracing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Offline: the SDK would upload traces to its vendor."""
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")


def _agent(
    project: Path, guardrail: agents.ToolInputGuardrail[Any] | None, client: AsyncOpenAI
) -> agents.Agent[Any]:
    @agents.function_tool(tool_input_guardrails=[guardrail] if guardrail else [])
    def shell(command: str) -> str:
        """Run a shell command in the project folder."""
        done = subprocess.run(
            command, shell=True, cwd=project, capture_output=True, text=True, timeout=30
        )
        return done.stdout + done.stderr

    model = agents.OpenAIChatCompletionsModel(model="gpt-4.1", openai_client=client)
    return agents.Agent(name="shell", instructions="Run commands.", tools=[shell], model=model)


def _events(client: redis.Redis, ns: str) -> list[Event]:
    return [decode(f[b"e"], Event) for _, f in client.xrange(keys.events(ns))]


def _run(
    fleet: Fleet,
    project: Path,
    command: str,
    *,
    on_deny: OnDeny = "reject_content",
    guarded: bool = True,
    group_id: str | None = None,
) -> tuple[FakeChatModel, str]:
    """One run whose model asks for ``command``: what the model got back, its final text
    (``guarded=False``: the tool has no guardrail, the run only the lifecycle hooks;
    ``group_id``: the run's conversation, its events' session)."""
    model = FakeChatModel([command], final_text="Done.")
    guardrail = tool_input_guardrail(fleet, tools=TOOLS, on_deny=on_deny) if guarded else None
    hooks = FleetRunHooks(fleet, tools=TOOLS)

    async def run() -> str:
        with serve(model) as url:
            async with AsyncOpenAI(base_url=url, api_key="dummy", max_retries=0) as client:
                try:
                    result = await agents.Runner.run(
                        _agent(project, guardrail, client),
                        "run the command",
                        hooks=hooks,
                        max_turns=4,
                        run_config=agents.RunConfig(tracing_disabled=True, group_id=group_id),
                    )
                finally:
                    await hooks.flush()
                    await fleet.aclose()
        return str(result.final_output)

    return model, asyncio.run(run())


def test_the_fleet_refuses_a_guarded_call_and_the_run_goes_on(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, chain_worker: None, tmp_path: Path
) -> None:
    project = project_with_disk(tmp_path)
    fleet = fleet_at(real_redis_url, namespace)
    model, final = _run(fleet, project, GUARDED)
    reason = last_deny(real_redis, namespace)
    assert "mkfs" in reason
    assert model.result_texts() == [reason]  # the model reads the fleet's reason
    assert final == "Done."
    assert untouched(project)

    model, final = _run(fleet, project, HARMLESS)
    (text,) = model.result_texts()
    assert "disk.img" in text  # ls ran
    (after,) = after_tool_events(real_redis, namespace)
    assert after.payload["tool_name"] == "Bash"
    assert after.payload["harness_tool_name"] == "shell"
    assert after.payload["tool_input"] == {"command": HARMLESS}
    assert after.meta["harness"] == "openai-agents"
    assert after.agent_id == "sdk-test"
    assert after.payload["tool_use_id"].startswith("call_fake")
    # the run's lifecycle, in the session of the guarded calls (the Fleet's)
    assert after.session_id == fleet.session_id
    kinds = [e.kind for e in _events(real_redis, namespace) if e.session_id == fleet.session_id]
    assert kinds.count("SessionStart") == kinds.count("Stop") == 2  # one per run
    assert {"BeforeLLMCall", "LLMOutput", "PostToolUse"} <= set(kinds)


def test_raise_exception_halts_the_run_on_a_fleet_deny(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, chain_worker: None, tmp_path: Path
) -> None:
    project = project_with_disk(tmp_path)
    fleet = fleet_at(real_redis_url, namespace)
    with pytest.raises(agents.ToolInputGuardrailTripwireTriggered) as halted:
        _run(fleet, project, GUARDED, on_deny="raise_exception")
    said = halted.value.output.output_info
    assert said["outcome"] == "deny"
    assert said["reason"] == last_deny(real_redis, namespace)
    assert untouched(project)


def test_with_the_fleet_down_a_guarded_call_is_still_refused(
    tmp_path: Path, namespace: str
) -> None:
    project = project_with_disk(tmp_path)
    model, final = _run(fleet_at(UNREACHABLE, namespace), project, GUARDED)
    (text,) = model.result_texts()
    assert text.startswith(UNAVAILABLE)
    assert "fails closed" in text
    assert final == "Done."
    assert untouched(project)


def test_a_fleet_that_never_answers_refuses_the_call_in_time_without_holding_the_loop(
    tmp_path: Path, namespace: str
) -> None:
    """The SDK has no guardrail timeout: the guardrail bounds its own wait (the request's
    deadline, within the Fleet's timeout), and the agent's loop keeps running meanwhile."""
    project = project_with_disk(tmp_path)

    async def watched(fleet: Fleet) -> float:
        guardrail = tool_input_guardrail(fleet, tools=TOOLS)
        model = FakeChatModel([GUARDED], final_text="Done.")
        async with loop_watch() as watch:
            with serve(model) as url:
                async with AsyncOpenAI(base_url=url, api_key="dummy", max_retries=0) as client:
                    await agents.Runner.run(
                        _agent(project, guardrail, client),
                        "run the command",
                        run_config=agents.RunConfig(tracing_disabled=True),
                    )
        await fleet.aclose()
        (text,) = model.result_texts()
        assert text.startswith(UNAVAILABLE)
        return watch.longest_gap_s

    with silent_redis() as url:
        started = time.monotonic()
        fleet = fleet_at(url, namespace, timeout_s=6, deadline_ms=LONG_DEADLINE_MS)
        longest_gap_s = asyncio.run(watched(fleet))
        took = time.monotonic() - started
    assert LONG_DEADLINE_MS / 1000 <= took < 6  # refused at the deadline, within the Fleet's
    assert longest_gap_s < 1.0  # the loop was never held while the guardrail waited
    assert untouched(project)


def test_a_tool_without_the_guardrail_is_noticed_as_unguarded_and_a_guarded_one_never(
    real_redis_url: str, namespace: str, tmp_path: Path
) -> None:
    project = project_with_disk(tmp_path)
    with dev_fleet(real_redis_url, namespace, tmp_path):
        fleet = fleet_at(real_redis_url, namespace, agent_id="sdk-unguarded")
        _run(fleet, project, HARMLESS)
        # a conversation of its own (the fake numbers every run's calls from 1)
        _run(fleet, project, "pwd", guarded=False, group_id="conversation-2")
        found: list[dict[str, Any]] = []

        def listed() -> bool:
            found[:] = status_json(real_redis_url, namespace, tmp_path)["unguarded"]
            return bool(found)

        wait_for(listed, 20, "the unguarded call in status --json")
        time.sleep(1.5)  # the guarded call's post event came first: it had its look already
        [call] = status_json(real_redis_url, namespace, tmp_path)["unguarded"]
    assert (call["agent"], call["session"], call["tool"], call["cli"]) == (
        "sdk-unguarded",
        "conversation-2",
        "Bash",
        "openai-agents",
    )


def test_the_hooks_refuse_a_fleet_behind_the_gateway_which_serves_agent_clis_only() -> None:
    remote = Fleet(gateway_url="http://127.0.0.1:1")
    with pytest.raises(ValueError, match="the gateway serves the agent CLIs' hook paths only"):
        tool_input_guardrail(remote)
    with pytest.raises(ValueError, match="the gateway serves the agent CLIs' hook paths only"):
        FleetRunHooks(remote)


def test_an_ask_or_a_rewrite_is_refused_saying_what_to_do_and_a_halt_halts(
    fleet: tuple[str, str], tmp_path: Path
) -> None:
    """The scripted worker answers by the markers in the command (tests/claude_code_helpers)."""
    url, ns = fleet
    project = project_with_disk(tmp_path)
    asking = fleet_at(url, ns)
    model, _ = _run(asking, project, "echo HOOKBUS_ASK")
    (text,) = model.result_texts()
    assert text == (
        "a person must confirm this call first (a person must look: PreToolUse of "
        f"{asking.session_id}); it was not run"
    )
    model, _ = _run(fleet_at(url, ns), project, "echo HOOKBUS_REWRITE > ran.txt")
    (text,) = model.result_texts()
    assert text.startswith("not run as given: run it with these arguments instead: {")
    assert '"ls -la"' in text
    assert not (project / "ran.txt").exists()
    with pytest.raises(agents.ToolInputGuardrailTripwireTriggered) as halted:
        _run(fleet_at(url, ns), project, "echo HOOKBUS_HALT > ran.txt")  # reject_content: a halt
    assert halted.value.output.output_info["outcome"] == "halt"
    assert not (project / "ran.txt").exists()
