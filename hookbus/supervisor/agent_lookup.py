"""The agent registry's read on the hook path: which agent runs in this tmux session, and its
effective hook settings.

``hookbus claude-code hook`` makes this read on every wake-worthy event of an agent inside
tmux, in a process that starts per event, so this module imports only ``json``: no redis-py
(the caller passes any ``execute(*args)``: the lean RESP client's ``call``), no logging, no
dataclasses, no regular expressions. Writing and checking the registry is
:mod:`hookbus.supervisor.agent_registry` and :mod:`hookbus.supervisor.agent_schema`.

Hook settings resolve **per field** in three tiers: the agent's ``hook_settings``, then the
global ``hook_settings``, then the built-in default.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Literal

from hookbus.bus import keys
from hookbus.errors import AgentRegistryError

#: Built-in defaults of the hook settings (the third tier).
HOOK_SETTING_DEFAULTS: dict[str, Any] = {
    "pane_capture_lines": 120,
    "context_pressure_threshold": 50,
    "autocompact_pct": 50,
    "hook_mode": "async",
}
#: The hook settings, in display order.
HOOK_SETTING_KEYS: tuple[str, ...] = tuple(HOOK_SETTING_DEFAULTS)
Source = Literal["agent", "global", "default"]


class ManagedAgent:
    """What the hook path needs about the agent behind a tmux session."""

    __slots__ = ("agent_id", "openclaw_session_id", "settings", "tmux_session_name")

    def __init__(
        self,
        agent_id: str,
        tmux_session_name: str,
        openclaw_session_id: str,
        settings: dict[str, Any],
    ) -> None:
        self.agent_id = agent_id
        self.tmux_session_name = tmux_session_name
        self.openclaw_session_id = openclaw_session_id
        self.settings = settings

    def __repr__(self) -> str:
        return f"ManagedAgent({self.agent_id!r}, session={self.tmux_session_name!r})"


def resolve_settings(
    agent: Mapping[str, Any], global_part: Mapping[str, Any]
) -> dict[str, tuple[Any, Source]]:
    """Each hook setting's effective value and where it came from, field by field."""
    own = agent.get("hook_settings") or {}
    shared = global_part.get("hook_settings") or {}
    out: dict[str, tuple[Any, Source]] = {}
    for key, default in HOOK_SETTING_DEFAULTS.items():
        if key in own:
            out[key] = (own[key], "agent")
        elif key in shared:
            out[key] = (shared[key], "global")
        else:
            out[key] = (default, "default")
    return out


def effective_settings(agent: Mapping[str, Any], global_part: Mapping[str, Any]) -> dict[str, Any]:
    """The effective hook settings of an agent (values only)."""
    return {key: value for key, (value, _src) in resolve_settings(agent, global_part).items()}


def decode_text(value: Any) -> str | None:
    """A Redis reply as text (None stays None)."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def load_json(raw: Any, what: str) -> dict[str, Any]:
    """A stored JSON object (None: empty), or AgentRegistryError saying what is broken."""
    text = decode_text(raw)
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        raise AgentRegistryError(
            f"the stored {what} is not JSON; re-import the registry (`hookbus agents import`)"
        ) from None
    if not isinstance(value, dict):
        raise AgentRegistryError(f"the stored {what} is not a JSON object; re-import it")
    return value


def lookup_session(execute: Callable[..., Any], ns: str, session_name: str) -> ManagedAgent | None:
    """The agent whose ``tmux_session_name`` is ``session_name``, with its effective settings.

    None when the session is not in the registry, and also when the registry cannot be read
    as expected: an unreadable registry means a non-managed session, never a crash of the
    agent's hook. Three commands: the session index, the entry, the global part.
    """
    try:
        agent_id = decode_text(execute("HGET", keys.agent_sessions(ns), session_name))
        if agent_id is None:
            return None
        entry = load_json(execute("HGET", keys.agents(ns), agent_id), "agent entry")
        global_part = load_json(execute("GET", keys.agents_global(ns)), "global part")
    except AgentRegistryError:
        return None
    if entry.get("tmux_session_name") != session_name:
        return None  # a stale index entry: the agent moved to another session
    return ManagedAgent(
        agent_id=str(entry.get("agent_id", agent_id)),
        tmux_session_name=session_name,
        openclaw_session_id=str(entry.get("openclaw_session_id", "")),
        settings=effective_settings(entry, global_part),
    )
