"""Deny ``rm -r``/``rm -rf`` aimed at /, ~ or a bare wildcard (the demo's guard)."""

from __future__ import annotations

import shlex
from typing import Any

DANGEROUS_TARGETS = {"/", "~", "*", "/*", "~/"}


def check(event: Any) -> dict[str, Any] | None:
    command = str(event.payload.get("tool_input", {}).get("command", ""))
    try:
        words = shlex.split(command)
    except ValueError:
        return {"outcome": "deny", "reason": "refused: the command does not parse"}
    if words[:1] == ["rm"] and any(w.startswith("-") and "r" in w for w in words[1:]):
        targets = [w for w in words[1:] if not w.startswith("-")]
        if any(t in DANGEROUS_TARGETS for t in targets):
            return {"outcome": "deny", "reason": f"refused: {command!r} deletes everything"}
    return None
