"""The fleet's guardrail and lifecycle hooks for the OpenAI Agents SDK (PyPI
``openai-agents`` 0.24 and later).

The SDK's blocking hook point is a *tool input guardrail*, listed per function tool; its
answer is ``allow``, ``reject_content`` (the call is skipped, the model reads the message
instead of the tool's output, and the run goes on) or ``raise_exception`` (the run halts with
``ToolInputGuardrailTripwireTriggered``)::

    from agents import Agent, Runner, function_tool
    from hookbus.integrations import Fleet
    from hookbus.integrations.openai_agents import FleetRunHooks, tool_input_guardrail

    fleet = Fleet(agent_id="release-bot")

    @function_tool(tool_input_guardrails=[tool_input_guardrail(fleet, tools={"shell": "Bash"})])
    def shell(command: str) -> str: ...

    await Runner.run(agent, "...", hooks=FleetRunHooks(fleet, tools={"shell": "Bash"}))

A fleet deny (or an *ask*: a guardrail has no person to ask) refuses the call with
``reject_content`` by default, or halts the run with ``on_deny="raise_exception"``; a halt
always halts. The SDK gives a guardrail no timeout and halts the whole run when one raises,
so the guardrail bounds its own wait (the Fleet's ``timeout_s``) and never raises: when the
fleet cannot answer, the call is refused with a reason saying hookbus is unavailable.

:class:`FleetRunHooks` publishes the run's lifecycle (agent start and end, model calls,
handoffs, each tool's result) without waiting: RunHooks cannot decide anything, and a slow
Redis must not slow the agent. Tool names are the program's own; ``tools`` maps them to the
canonical ones (``{"shell": "Bash"}``) so guards written against ``Bash`` match. Every event's
session is the run's ``RunConfig(group_id=...)`` where one is given, else the Fleet's
``session_id``: give the guardrail and the hooks one Fleet, so that each call and its result
are one session's (the fleet pairs them to notice a call no guard was asked about).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from typing import Any, Literal

from hookbus.errors import MissingExtra
from hookbus.harnesses.adapters import (
    REQUEST,
    Adapter,
    Answer,
    Output,
    Route,
    render_unavailable,
    unapplied_as_deny,
)
from hookbus.integrations.fleet import Fleet

try:
    import agents
except ImportError as exc:  # the extra is not installed: say which one installs it
    raise MissingExtra("openai-agents", "openai-agents") from exc

NAME = "openai-agents"
#: Longest text of a tool result or an agent's output put in an event, in characters.
MAX_TEXT_CHARS = 4096
#: The SDK callbacks' events; the guardrail's PreToolUse is the only one that waits.
ROUTES: tuple[Route, ...] = (
    Route("PreToolUse", mode=REQUEST, guard=True),
    Route("PostToolUse"),
    Route("SessionStart"),
    Route("BeforeLLMCall"),
    Route("LLMOutput"),
    Route("SubagentStart"),
    Route("Stop"),
)
#: Input fields that describe the session rather than the event: they go to ``meta``.
META_KEYS = ("cwd", "hook_event_name", "agent_name")

OnDeny = Literal["reject_content", "raise_exception"]


def _deny(name: str, reason: str) -> dict[str, Any]:
    return {"outcome": "deny", "reason": reason}


def render(route: Route, answer: Answer) -> Output:
    """The guardrail's terms for ``answer``: ``{"outcome": "deny" | "halt", "reason"}``,
    or nothing (allow). An ask or a rewritten input becomes a deny saying what to do: a
    guardrail can neither ask a person nor change the call's arguments."""
    if answer.unavailable is not None:
        return render_unavailable(route, answer, _deny)
    if answer.outcome == "halt":
        return Output({"outcome": "halt", "reason": answer.reason or "stopped by a hookbus hook"})
    if answer.outcome == "deny":
        return Output(_deny(route.name, answer.reason or "denied by a hookbus hook"))
    unapplied = unapplied_as_deny(
        route.name,
        answer,
        _deny,
        ask_reason="a person must confirm this call first ({reason}); it was not run",
        rewrite_reason="not run as given: run it with these arguments instead: {input}",
    )
    return Output(unapplied or None)


def _in_process(fleet: Fleet) -> Fleet:
    if fleet.remote is not None:
        raise ValueError(
            "the OpenAI Agents SDK's hooks ask the fleet in-process: the gateway serves the "
            "agent CLIs' hook paths only; give this Fleet settings (a producer Redis user) "
            "instead of gateway_url"
        )
    return fleet


def row(tools: Mapping[str, str] | None = None) -> Adapter:
    """The adapter row of one program: its tool names mapped by ``tools``."""
    return Adapter(
        NAME,
        label="OpenAI Agents SDK",
        binary="",
        routes=ROUTES,
        tools=dict(tools or {}),
        render=render,
        meta_keys=META_KEYS,
        settings={},
        installer="",
    )


def _session(context: Any, fleet: Fleet) -> str:
    run_config = getattr(context, "run_config", None)
    group = getattr(run_config, "group_id", None)
    return group if isinstance(group, str) and group else fleet.session_id


def _arguments(raw: str) -> dict[str, Any]:
    """The call's arguments as the tool will get them (the model's JSON string)."""
    try:
        parsed = json.loads(raw) if raw else {}
    except ValueError:
        return {"arguments": raw}
    return parsed if isinstance(parsed, dict) else {"arguments": parsed}


def _text(value: Any) -> str:
    return (value if isinstance(value, str) else repr(value))[:MAX_TEXT_CHARS]


def tool_input_guardrail(
    fleet: Fleet | None = None,
    *,
    tools: Mapping[str, str] | None = None,
    on_deny: OnDeny = "reject_content",
) -> agents.ToolInputGuardrail[Any]:
    """A guardrail for ``@function_tool(tool_input_guardrails=[...])`` that asks the fleet
    about each call (a new :class:`~hookbus.integrations.fleet.Fleet` when none is given)."""
    if on_deny not in ("reject_content", "raise_exception"):
        raise ValueError(f"on_deny must be 'reject_content' or 'raise_exception', not {on_deny!r}")
    fleet = _in_process(fleet if fleet is not None else Fleet())
    harness = row(tools)

    async def hookbus_fleet(
        data: agents.ToolInputGuardrailData,
    ) -> agents.ToolGuardrailFunctionOutput:
        context = data.context
        event = {
            "hook_event_name": "PreToolUse",
            "session_id": _session(context, fleet),
            "tool_name": context.tool_name,
            "tool_input": _arguments(context.tool_arguments),
            "tool_use_id": context.tool_call_id,
            "cwd": os.getcwd(),
            "agent_name": getattr(data.agent, "name", None),
        }
        said = (await fleet.answer(harness, event)).stdout or {}
        outcome, reason = said.get("outcome"), str(said.get("reason") or "")
        if outcome == "halt" or (outcome == "deny" and on_deny == "raise_exception"):
            return agents.ToolGuardrailFunctionOutput.raise_exception(output_info=dict(said))
        if outcome == "deny":
            return agents.ToolGuardrailFunctionOutput.reject_content(reason, dict(said))
        return agents.ToolGuardrailFunctionOutput.allow()

    return agents.ToolInputGuardrail(guardrail_function=hookbus_fleet, name="hookbus_fleet")


class FleetRunHooks(agents.RunHooks[Any]):
    """``Runner.run(..., hooks=FleetRunHooks(fleet))``: the run's lifecycle published to
    the fleet in the background (:meth:`flush` waits for what is on its way)."""

    def __init__(
        self,
        fleet: Fleet | None = None,
        *,
        tools: Mapping[str, str] | None = None,
    ) -> None:
        self.fleet = _in_process(fleet if fleet is not None else Fleet())
        self.harness = row(tools)
        self._sending: set[asyncio.Task[Output]] = set()

    def _publish(self, context: Any, name: str, agent: Any, **payload: Any) -> None:
        data = {
            "hook_event_name": name,
            "session_id": _session(context, self.fleet),
            "cwd": os.getcwd(),
            "agent_name": getattr(agent, "name", None),
            **payload,
        }
        task = asyncio.get_running_loop().create_task(self.fleet.answer(self.harness, data))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def flush(self) -> None:
        """Wait until every event published so far has been sent (or given up on)."""
        if self._sending:
            await asyncio.gather(*self._sending)

    async def on_agent_start(self, context: Any, agent: Any) -> None:
        self._publish(context, "SessionStart", agent)

    async def on_llm_start(
        self, context: Any, agent: Any, system_prompt: str | None, input_items: list[Any]
    ) -> None:
        self._publish(
            context, "BeforeLLMCall", agent, system=system_prompt, input_items=len(input_items)
        )

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        usage = getattr(response, "usage", None)
        self._publish(
            context,
            "LLMOutput",
            agent,
            response_id=getattr(response, "response_id", None),
            input_tokens=getattr(usage, "input_tokens", None),
            output_tokens=getattr(usage, "output_tokens", None),
        )

    async def on_handoff(self, context: Any, from_agent: Any, to_agent: Any) -> None:
        self._publish(context, "SubagentStart", to_agent, from_agent=from_agent.name)

    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
        self._publish(
            context,
            "PostToolUse",
            agent,
            tool_name=getattr(context, "tool_name", None) or getattr(tool, "name", ""),
            tool_input=_arguments(getattr(context, "tool_arguments", "") or ""),
            tool_response=_text(result),
            tool_use_id=getattr(context, "tool_call_id", None),
        )

    async def on_agent_end(self, context: Any, agent: Any, output: Any) -> None:
        self._publish(context, "Stop", agent, output=_text(output))
