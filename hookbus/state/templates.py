"""Durations (``"1h"``) and key templates (``"deploy:{payload.tool_input.environment}"``).

A key template names what an event's state is keyed by: ``{agent}``, ``{session}`` (the
agent's session, rendered ``AGENT/SESSION``: a session id another agent sends is its own),
``{tool}``, ``{kind}`` and ``{payload.<path>}`` (dotted keys into the payload). Templates are
checked when a manifest is validated; an event that lacks a field the template names is
outside the rule (it neither counts nor takes a lock), so a missing field never widens a
rule to every event.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import Any

from hookbus.state.sessions import event_session

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*\Z")
_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
#: Longest window, TTL or period a rule may declare, in milliseconds (30 days).
MAX_DURATION_MS = 30 * 86_400_000
#: Longest rendered key kept as written; a longer one is shortened with a digest.
MAX_KEY_CHARS = 200
_FIELD = re.compile(r"\{([^{}]*)\}")
_NAMES = frozenset({"agent", "session", "tool", "kind"})
_PATH_PART = re.compile(r"^[A-Za-z0-9_-]+\Z")


def parse_duration(text: str) -> int:
    """``"90s"``, ``"15m"``, ``"1h"``, ``"2d"``, ``"500ms"`` in milliseconds (ValueError
    naming the accepted forms otherwise)."""
    found = _DURATION.match(text) if isinstance(text, str) else None
    if found is None:
        raise ValueError(
            f"{text!r} is not a duration: write e.g. '500ms', '30s', '15m', '1h', '2d'"
        )
    ms = int(float(found.group(1)) * _UNIT_MS[found.group(2)])
    if ms <= 0 or ms > MAX_DURATION_MS:
        raise ValueError(f"{text!r} must be more than 0 and at most 30 days")
    return ms


def format_ms(ms: int) -> str:
    """A duration for people: ``42s``, ``14m 2s``, ``1h 5m``."""
    seconds = max(ms, 0) // 1000
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m {seconds}s" if seconds else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes}m" if minutes else f"{hours}h"


def check_template(template: str) -> str:
    """Validate a key template (ValueError naming the bad field)."""
    if not isinstance(template, str) or not template.strip():
        raise ValueError("must be a non-empty template such as '{agent}:{tool}'")
    if len(template) > MAX_KEY_CHARS:
        raise ValueError(f"must be at most {MAX_KEY_CHARS} characters")
    stripped = _FIELD.sub("", template)
    if "{" in stripped or "}" in stripped:
        raise ValueError("has an unbalanced '{' or '}'")
    for name in _FIELD.findall(template):
        if name in _NAMES:
            continue
        head, _, path = name.partition(".")
        if head != "payload" or not path or not all(_PATH_PART.match(p) for p in path.split(".")):
            raise ValueError(
                f"unknown field {{{name}}}: use {{agent}}, {{session}}, {{tool}}, {{kind}} "
                "or {payload.<key>[.<key>...]}"
            )
    return template


def compile_template(template: str) -> Callable[[Any], str | None]:
    """A function from an event to its rendered key, or None when the event lacks a field."""
    check_template(template)
    parts: list[str | tuple[str, ...]] = []
    at = 0
    for found in _FIELD.finditer(template):
        parts.append(template[at : found.start()])
        parts.append(tuple(found.group(1).split(".")))
        at = found.end()
    parts.append(template[at:])

    def render(event: Any) -> str | None:
        out: list[str] = []
        for part in parts:
            if isinstance(part, str):
                out.append(part)
                continue
            value = _field(event, part)
            if value is None or value == "":
                return None
            out.append(value)
        return shorten("".join(out))

    return render


def _field(event: Any, path: tuple[str, ...]) -> str | None:
    head = path[0]
    if head == "agent":
        return _text(event.agent_id)
    if head == "session":
        # a session is its agent's: AGENT/SESSION, so no other agent shares its key
        return event_session(event)
    if head == "kind":
        return _text(event.kind)
    payload = event.payload if isinstance(event.payload, dict) else {}
    if head == "tool":
        return _text(payload.get("tool_name"))
    value: Any = payload
    for part in path[1:]:
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return _text(value)


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, dict | list):
        return None
    text = str(value)
    # keys are shown to operators and parsed back from Redis: no control characters
    return "".join(c if c.isprintable() else "?" for c in text)


def shorten(key: str) -> str:
    """``key`` as written when short, else its head and a digest (keys stay bounded)."""
    if len(key) <= MAX_KEY_CHARS:
        return key
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return f"{key[: MAX_KEY_CHARS - 18]}~{digest}"
