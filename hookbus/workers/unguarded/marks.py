"""The name of a tool call, as its guard request and its post event both carry it.

A call is named by its agent, its session and the CLI's own id of the call where the CLI
sends one (Claude Code, Codex and Qwen Code send ``tool_use_id`` with both events), else by
the tool's canonical name and a digest of its input (Gemini CLI and Copilot CLI send no
id; their post event repeats the input). A guard that rewrote the input names the call
both ways: the post event of a rewritten call carries the input that ran.

Names are members of one sorted set per partition (a session's events and requests share
its partition), scored with the time of the answer, kept for :data:`MARK_TTL_MS`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import msgspec

from hookbus.bus.wire import Event

#: Kinds whose answer marks the call as guarded.
GUARD_KINDS = frozenset({"PreToolUse"})
#: Kinds that say a tool call ran (or failed while running).
POST_KINDS = frozenset({"PostToolUse", "PostToolUseFailure"})
#: How long a mark is kept, in ms: a tool may run long after its guard answered (a build),
#: and an approval may keep it waiting (five minutes by default) before it runs.
MARK_TTL_MS = 3_600_000
#: The payload fields a CLI names its tool call with, the first present wins.
ID_FIELDS = ("tool_use_id", "tool_call_id")

_SEP = b"\x1f"
_json = msgspec.json.Encoder(order="sorted")


def _owner(event: Event) -> bytes:
    return (event.agent_id or "").encode() + _SEP + (event.session_id or "").encode() + _SEP


def call_id(payload: Mapping[str, Any]) -> str | None:
    """The CLI's id of the call, when it sends one."""
    for field in ID_FIELDS:
        value = payload.get(field)
        if isinstance(value, str) and value:
            return value
    return None


def input_name(tool: str, tool_input: object) -> bytes:
    """``tool`` and a digest of its input (key order does not matter)."""
    try:
        encoded = _json.encode(tool_input)
    except (TypeError, msgspec.EncodeError):
        encoded = repr(tool_input).encode()
    digest = hashlib.blake2b(encoded, digest_size=12).hexdigest()
    return b"in:" + tool.encode() + _SEP + digest.encode()


def guarded_names(event: Event, updated: Mapping[str, Any] | None = None) -> list[bytes]:
    """The names a guard's answer to ``event`` marks ([] for a kind that guards no call)."""
    if event.kind not in GUARD_KINDS:
        return []
    payload = event.payload
    owner = _owner(event)
    found = call_id(payload)
    if found is not None:
        return [owner + b"id:" + found.encode()]
    tool = payload.get("tool_name")
    if not isinstance(tool, str):
        return []
    names = [owner + input_name(tool, payload.get("tool_input"))]
    rewritten = (updated or {}).get("tool_input")
    if isinstance(rewritten, dict):
        names.append(owner + input_name(tool, rewritten))
    return names


def ran_name(event: Event) -> bytes | None:
    """The name of the call a post event says ran (None: not a post event, or one that
    names no call)."""
    if event.kind not in POST_KINDS:
        return None
    payload = event.payload
    owner = _owner(event)
    found = call_id(payload)
    if found is not None:
        return owner + b"id:" + found.encode()
    tool = payload.get("tool_name")
    if not isinstance(tool, str):
        return None
    return owner + input_name(tool, payload.get("tool_input"))
