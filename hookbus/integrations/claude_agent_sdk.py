"""The fleet's hooks for the Claude Agent SDK (PyPI ``claude-agent-sdk`` 0.2.184 and later).

The SDK runs Claude Code as a subprocess and calls Python callbacks over its control
protocol; each callback receives exactly the JSON Claude Code gives a command hook on stdin
and answers Claude Code's hook JSON. So the callbacks here are the ``claude-code`` row of the
adapter table, asked in-process::

    from claude_agent_sdk import ClaudeAgentOptions, query
    from hookbus.integrations.claude_agent_sdk import hooks

    options = ClaudeAgentOptions(hooks=hooks(agent_id="release-bot"))

:func:`hooks` registers every SDK event Claude Code's row knows. The SDK lets a call through
when a callback raises (unless its matcher says ``on_failure="block"``), so the callbacks
never raise: when the fleet cannot answer, a guard event (PreToolUse, PermissionRequest)
gets Claude Code's deny with a reason saying hookbus is unavailable, and the guards'
matchers say ``on_failure="block"`` besides, so even a failure outside the callback blocks.
Each matcher's ``timeout`` is the Fleet's, and the callback answers a little before it.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any, cast

from hookbus.errors import MissingExtra
from hookbus.harnesses.adapters import Adapter, adapter
from hookbus.integrations.fleet import SDK_MARGIN_S, Fleet

try:
    import claude_agent_sdk
    from claude_agent_sdk import types as sdk_types
except ImportError as exc:  # the extra is not installed: say which one installs it
    raise MissingExtra("claude-agent-sdk", "claude-agent-sdk") from exc

#: The Claude Code row: the SDK's hook input and output are Claude Code's own.
HARNESS = "claude-code"

Callback = Callable[
    [sdk_types.HookInput, "str | None", sdk_types.HookContext],
    Coroutine[Any, Any, sdk_types.HookJSONOutput],
]


def sdk_events() -> tuple[str, ...]:
    """The hook events the installed SDK can register (its ``HookEvent`` literal)."""
    return tuple(arg for arg in _literals(sdk_types.HookEvent))


def _literals(tp: Any) -> Iterable[str]:
    for arg in typing.get_args(tp):
        if isinstance(arg, str):
            yield arg
        else:
            yield from _literals(arg)


def hooks(
    fleet: Fleet | None = None,
    *,
    agent_id: str | None = None,
    events: Iterable[str] | None = None,
) -> dict[sdk_types.HookEvent, list[claude_agent_sdk.HookMatcher]]:
    """The ``hooks=`` mapping of ``ClaudeAgentOptions``: one matcher per event (every
    event the SDK and Claude Code's row share, or ``events``), each asking ``fleet`` (a
    new :class:`~hookbus.integrations.fleet.Fleet` for ``agent_id`` when none is given).
    An event the installed SDK cannot register raises ValueError naming the ones it can."""
    fleet = fleet if fleet is not None else Fleet(agent_id=agent_id)
    harness = adapter(HARNESS)
    known = sdk_events()
    wanted = tuple(events) if events is not None else tuple(e for e in known if e in harness.routes)
    unknown = [name for name in wanted if name not in known]
    if unknown:
        raise ValueError(
            f"claude-agent-sdk {claude_agent_sdk.__version__} has no hook event "
            f"{', '.join(unknown)}; it has {', '.join(known)}"
        )
    matchers: dict[sdk_types.HookEvent, list[claude_agent_sdk.HookMatcher]] = {}
    for name in wanted:
        guard = harness.route(name).guard
        matchers[cast("sdk_types.HookEvent", name)] = [
            claude_agent_sdk.HookMatcher(
                matcher=None,
                hooks=[callback(fleet, harness)],
                timeout=fleet.timeout_s + SDK_MARGIN_S,
                on_failure="block" if guard else None,
            )
        ]
    return matchers


def callback(fleet: Fleet, harness: Adapter) -> Callback:
    """One SDK hook callback: Claude Code's hook input to the fleet, its answer back in
    Claude Code's hook JSON (``{}`` for no opinion: the SDK counts ``None`` as a failure)."""

    async def ask_the_fleet(
        input_data: sdk_types.HookInput, tool_use_id: str | None, context: sdk_types.HookContext
    ) -> sdk_types.HookJSONOutput:
        data: dict[str, Any] = dict(input_data) if isinstance(input_data, Mapping) else {}
        if tool_use_id and "tool_use_id" not in data:
            data["tool_use_id"] = tool_use_id
        output = await fleet.answer(harness, data)
        return cast("sdk_types.HookJSONOutput", dict(output.stdout or {}))

    return ask_the_fleet
