"""The agent registry's schema (the recovery registry), checked strictly, resolved per field.

A registry holds agents that run in tmux sessions and the supervising agent each one wakes
(``openclaw_session_id``), plus a global part. Hook settings resolve **per field** in three
tiers: the agent's ``hook_settings``, then the global ``hook_settings``, then the built-in
default (:data:`HOOK_SETTING_DEFAULTS`). A registry that says nothing still works.

Strict on purpose (no open-ended keys): an unknown key or a value of the wrong
type or range is refused with the key named, so a typo such as ``pane_capure_lines`` is an
error and not a setting that silently does nothing.

Pure stdlib: the lean hook path (``hookbus claude-code hook``) resolves settings with this
module and must not pay for pydantic.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from hookbus.errors import AgentRegistryError
from hookbus.supervisor.agent_lookup import (
    HOOK_SETTING_DEFAULTS,
    HOOK_SETTING_KEYS,
    Source,
    effective_settings,
    resolve_settings,
)

__all__ = [
    "HOOK_SETTING_DEFAULTS",
    "HOOK_SETTING_KEYS",
    "Source",
    "effective_settings",
    "resolve_settings",
]

#: Values of ``hook_mode``: fire-and-forget wakes, or wakes whose answer blocks Stop/PreCompact.
HOOK_MODES: tuple[str, ...] = ("async", "bidirectional")
#: Most pane lines a wake may carry (tmux history beyond this is noise for a supervisor).
MAX_PANE_CAPTURE_LINES = 10_000


# Identities end up as arguments of a supervisor command: no leading '-' (it would read as an
# option), no whitespace or control characters.
_AGENT_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_SESSION_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@+/=-]{0,199}$")
# tmux refuses ':' and '.' in session names (they separate window and pane in a target).
_TMUX_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_+@=-]{0,99}$")


def _int_in(low: int, high: int) -> Callable[[str, Any], int]:
    def check(key: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise AgentRegistryError(f"{key}: must be an integer, got {value!r}", key=key)
        if not low <= value <= high:
            raise AgentRegistryError(
                f"{key}: must be between {low} and {high}, got {value}", key=key
            )
        return value

    return check


def _one_of(*choices: str) -> Callable[[str, Any], str]:
    def check(key: str, value: Any) -> str:
        if value not in choices:
            raise AgentRegistryError(
                f"{key}: must be one of {', '.join(choices)}, got {value!r}", key=key
            )
        return str(value)

    return check


def _string(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise AgentRegistryError(f"{key}: must be a string, got {value!r}", key=key)
    return value


def _matching(pattern: re.Pattern[str], what: str, *, empty_ok: bool) -> Callable[[str, Any], str]:
    def check(key: str, value: Any) -> str:
        text = _string(key, value)
        if text == "" and empty_ok:
            return text
        if not pattern.match(text):
            raise AgentRegistryError(f"{key}: {what}, got {text!r}", key=key)
        return text

    return check


def _boolean(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise AgentRegistryError(f"{key}: must be true or false, got {value!r}", key=key)
    return value


def _integer(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise AgentRegistryError(f"{key}: must be an integer, got {value!r}", key=key)
    return value


_HOOK_SETTING_CHECKS: dict[str, Callable[[str, Any], Any]] = {
    "pane_capture_lines": _int_in(1, MAX_PANE_CAPTURE_LINES),
    "context_pressure_threshold": _int_in(0, 100),
    "autocompact_pct": _int_in(1, 100),
    "hook_mode": _one_of(*HOOK_MODES),
}

_AGENT_ID_CHECK = _matching(
    _AGENT_ID_RE,
    "must be 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit",
    empty_ok=False,
)
_TMUX_NAME_CHECK = _matching(
    _TMUX_NAME_RE,
    "must be 1-100 letters, digits, '_', '-', '+', '@' or '=' (tmux refuses ':' and '.'), "
    "not starting with '-'",
    empty_ok=False,
)
_SESSION_ID_CHECK = _matching(
    _SESSION_ID_RE,
    "must be empty or start with a letter or digit and hold no spaces (a uuid or an 'agent:...' "
    "key)",
    empty_ok=True,
)

#: Every key an agent entry may hold and its check.
AGENT_FIELD_CHECKS: dict[str, Callable[[str, Any], Any]] = {
    "agent_id": _AGENT_ID_CHECK,
    "enabled": _boolean,
    "auto_wake": _boolean,
    "topic_id": _integer,
    "openclaw_session_id": _SESSION_ID_CHECK,
    "working_directory": _string,
    "tmux_session_name": _TMUX_NAME_CHECK,
    "claude_resume_target": _string,
    "claude_launch_command": _string,
    "claude_post_launch_mode": _string,
    "system_prompt": _string,
    # hook_settings is checked key by key (check_hook_settings)
}
#: Keys of the registry's top level besides ``agents`` and ``hook_settings``.
GLOBAL_FIELD_CHECKS: dict[str, Callable[[str, Any], Any]] = {
    "global_status_openclaw_session_id": _SESSION_ID_CHECK,
    "global_status_openclaw_session_key": _string,
}


def check_hook_settings(value: Any, where: str) -> dict[str, Any]:
    """A validated copy of a ``hook_settings`` object; ``where`` prefixes key names."""
    if not isinstance(value, Mapping):
        raise AgentRegistryError(f"{where}: must be an object, got {value!r}", key=where)
    out: dict[str, Any] = {}
    for key, item in value.items():
        check = _HOOK_SETTING_CHECKS.get(key)
        name = f"{where}.{key}"
        if check is None:
            raise AgentRegistryError(
                f"{name}: unknown hook setting; known: {', '.join(HOOK_SETTING_KEYS)}", key=name
            )
        out[key] = check(name, item)
    return out


def check_agent(value: Any, where: str = "agent") -> dict[str, Any]:
    """A validated copy of one agent entry (``agent_id`` and ``tmux_session_name`` required)."""
    if not isinstance(value, Mapping):
        raise AgentRegistryError(f"{where}: must be an object, got {value!r}", key=where)
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key == "hook_settings":
            out[key] = check_hook_settings(item, f"{where}.hook_settings")
            continue
        check = AGENT_FIELD_CHECKS.get(key)
        if check is None:
            raise AgentRegistryError(
                f"{where}.{key}: unknown agent key; known: "
                f"{', '.join([*AGENT_FIELD_CHECKS, 'hook_settings'])}",
                key=f"{where}.{key}",
            )
        out[key] = check(f"{where}.{key}", item)
    for required in ("agent_id", "tmux_session_name"):
        if required not in out:
            raise AgentRegistryError(
                f"{where}.{required}: missing (every agent needs agent_id and tmux_session_name)",
                key=f"{where}.{required}",
            )
    return out


def check_global(value: Any) -> dict[str, Any]:
    """A validated copy of the registry's global part (everything but ``agents``)."""
    if not isinstance(value, Mapping):
        raise AgentRegistryError("the registry must be a JSON object", key=None)
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key == "agents":
            continue
        if key == "hook_settings":
            out[key] = check_hook_settings(item, "hook_settings")
            continue
        check = GLOBAL_FIELD_CHECKS.get(key)
        if check is None:
            raise AgentRegistryError(
                f"{key}: unknown registry key; known: agents, hook_settings, "
                f"{', '.join(GLOBAL_FIELD_CHECKS)}",
                key=key,
            )
        out[key] = check(key, item)
    return out


def check_registry(value: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Validate a whole registry document: ``(global part, agents)``.

    Refuses duplicate agent ids and two agents on one tmux session: a session must wake
    exactly one supervisor.
    """
    global_part = check_global(value)
    raw_agents = value.get("agents", [])
    if not isinstance(raw_agents, list):
        raise AgentRegistryError("agents: must be a list of agent objects", key="agents")
    agents = [check_agent(item, f"agents[{i}]") for i, item in enumerate(raw_agents)]
    check_unique(agents)
    return global_part, agents


def check_unique(agents: list[dict[str, Any]]) -> None:
    """Refuse two agents with one id, or two agents on one tmux session."""
    ids: dict[str, int] = {}
    sessions: dict[str, str] = {}
    for i, agent in enumerate(agents):
        agent_id = agent["agent_id"]
        if agent_id in ids:
            raise AgentRegistryError(
                f"agents[{i}].agent_id: {agent_id!r} is already agents[{ids[agent_id]}]",
                key=f"agents[{i}].agent_id",
            )
        ids[agent_id] = i
        name = agent["tmux_session_name"]
        if name in sessions:
            raise AgentRegistryError(
                f"agents[{i}].tmux_session_name: {name!r} is already the session of agent "
                f"{sessions[name]!r} (one session wakes one supervisor)",
                key=f"agents[{i}].tmux_session_name",
            )
        sessions[name] = agent_id


def parse_registry(text: str | bytes) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Parse and validate a recovery-registry JSON document."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise AgentRegistryError(f"the registry is not valid JSON: {exc}") from None
    return check_registry(value)


def registry_document(
    global_part: Mapping[str, Any], agents: list[dict[str, Any]]
) -> dict[str, Any]:
    """The recovery-registry JSON object (what ``hookbus agents export`` prints)."""
    doc = dict(global_part)
    doc["agents"] = sorted(agents, key=lambda a: str(a["agent_id"]))
    return doc


# --- ``set KEY=VALUE`` -------------------------------------------------------------------


def parse_assignment(text: str) -> tuple[str, str]:
    """Split ``KEY=VALUE``; ``hook_settings.KEY`` and a bare hook-setting name are the same."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise AgentRegistryError(f"{text!r}: write KEY=VALUE", key=key or None)
    return _setting_key(key), value


def _setting_key(key: str) -> str:
    if key.startswith("hook_settings."):
        return key.removeprefix("hook_settings.")
    return key


def coerce_value(key: str, text: str) -> Any:
    """The typed value of a command-line ``KEY=VALUE`` for ``key`` (checked)."""
    if key in _HOOK_SETTING_CHECKS:
        name = f"hook_settings.{key}"
        setting_check = _HOOK_SETTING_CHECKS[key]
        if key == "hook_mode":
            return setting_check(name, text)
        return setting_check(name, _parse_int(name, text))
    check = AGENT_FIELD_CHECKS.get(key)
    if check is None:
        known = [*AGENT_FIELD_CHECKS, *(f"hook_settings.{k}" for k in HOOK_SETTING_KEYS)]
        raise AgentRegistryError(f"{key}: unknown key; known: {', '.join(known)}", key=key)
    if check is _boolean:
        lowered = text.strip().lower()
        if lowered not in ("true", "false"):
            raise AgentRegistryError(f"{key}: must be true or false, got {text!r}", key=key)
        return lowered == "true"
    if check is _integer:
        return check(key, _parse_int(key, text))
    return check(key, text)


def coerce_global_value(key: str, text: str) -> Any:
    """The typed value of a global ``KEY=VALUE`` (hook settings and the global_status keys)."""
    if key in _HOOK_SETTING_CHECKS:
        return coerce_value(key, text)
    check = GLOBAL_FIELD_CHECKS.get(key)
    if check is None:
        known = [*(f"hook_settings.{k}" for k in HOOK_SETTING_KEYS), *GLOBAL_FIELD_CHECKS]
        raise AgentRegistryError(f"{key}: unknown global key; known: {', '.join(known)}", key=key)
    return check(key, text)


def _parse_int(key: str, text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise AgentRegistryError(f"{key}: must be an integer, got {text!r}", key=key) from None


def apply_assignments(
    entry: Mapping[str, Any], assignments: list[tuple[str, str]], unset: list[str]
) -> dict[str, Any]:
    """A new agent entry with ``assignments`` applied and ``unset`` keys removed (checked).

    Hook settings go into the agent's own ``hook_settings`` (the first tier); unsetting one
    lets the global value or the default show through again.
    """
    out = dict(entry)
    own = dict(out.get("hook_settings") or {})
    for key, text in assignments:
        if key == "agent_id":
            raise AgentRegistryError(
                "agent_id: cannot be changed; export, edit and import", key=key
            )
        value = coerce_value(key, text)
        if key in _HOOK_SETTING_CHECKS:
            own[key] = value
        else:
            out[key] = value
    for raw in unset:
        key = _setting_key(raw.strip())
        if key in _HOOK_SETTING_CHECKS:
            own.pop(key, None)
        elif key in ("agent_id", "tmux_session_name"):
            raise AgentRegistryError(f"{key}: required, cannot be unset", key=key)
        elif key in AGENT_FIELD_CHECKS:
            out.pop(key, None)
        else:
            raise AgentRegistryError(f"{key}: unknown key", key=key)
    if own:
        out["hook_settings"] = own
    else:
        out.pop("hook_settings", None)
    return check_agent(out, "agent")


def apply_global_assignments(
    global_part: Mapping[str, Any], assignments: list[tuple[str, str]], unset: list[str]
) -> dict[str, Any]:
    """A new global part with ``assignments`` applied and ``unset`` keys removed (checked)."""
    out = dict(global_part)
    shared = dict(out.get("hook_settings") or {})
    for key, text in assignments:
        value = coerce_global_value(key, text)
        if key in _HOOK_SETTING_CHECKS:
            shared[key] = value
        else:
            out[key] = value
    for raw in unset:
        key = _setting_key(raw.strip())
        if key in _HOOK_SETTING_CHECKS:
            shared.pop(key, None)
        elif key in GLOBAL_FIELD_CHECKS:
            out.pop(key, None)
        else:
            raise AgentRegistryError(f"{key}: unknown global key", key=key)
    if shared:
        out["hook_settings"] = shared
    else:
        out.pop("hook_settings", None)
    return check_global(out)
