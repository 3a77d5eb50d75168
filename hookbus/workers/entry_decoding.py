"""Bounded, per-entry decoding of stream entries (requests and events).

One entry is decoded at a time, and whatever it does wrong is that entry's problem only:
an entry over ``streams.max_event_bytes`` is refused before it is decoded, a payload nested
too deep for the decoder (msgspec raises RecursionError, not a DecodeError) or otherwise
undecodable is a :class:`~hookbus.errors.WireError`, and a decoded payload is walked
(iteratively) for its depth and key count before any hook sees it. The caller turns the
error into a dead letter or a policy answer for that entry alone; its neighbours in the
same read are untouched.
"""

from __future__ import annotations

from typing import Any

from hookbus.bus.wire import Event, decode
from hookbus.errors import WireError

#: Deepest nesting of objects and arrays a worker accepts in a payload (or meta); the
#: payload itself is level 1. Deep enough for real tool inputs, far from recursion limits.
MAX_DEPTH = 64
#: Most object keys a worker accepts in a payload (or meta), counted over every level.
MAX_KEYS = 10_000


def decode_event(data: bytes, *, max_bytes: int) -> Event:
    """The :class:`Event` in ``data``; :class:`WireError` saying why when it is not one."""
    if len(data) > max_bytes:
        raise WireError(
            f"entry is {len(data)} bytes, over streams.max_event_bytes ({max_bytes})", field="$"
        )
    try:
        return decode(data, Event)
    except WireError:
        raise
    except RecursionError as exc:
        raise WireError("payload nested too deep to decode (recursion limit)", field="$") from exc
    except Exception as exc:  # a decoder bug or an exotic input: still this entry's problem
        raise WireError(f"undecodable: {type(exc).__name__}: {exc}", field="$") from exc


def payload_problem(event: Event) -> str | None:
    """Why ``event``'s payload or meta is past the bounds (None when it is within them)."""
    for name, value in (("payload", event.payload), ("meta", event.meta)):
        problem = _bounds_problem(value)
        if problem is not None:
            return f"{name} {problem}"
    return None


def _bounds_problem(value: Any) -> str | None:
    keys = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH} levels"
        if isinstance(node, dict):
            keys += len(node)
            if keys > MAX_KEYS:
                return f"has more than {MAX_KEYS} keys"
            stack.extend((child, depth + 1) for child in node.values())
        elif isinstance(node, list):
            stack.extend((child, depth + 1) for child in node)
    return None
