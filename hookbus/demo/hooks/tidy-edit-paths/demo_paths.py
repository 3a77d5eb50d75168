"""Rewrite an Edit's ``file_path`` to its normal form (the demo's modify hook)."""

from __future__ import annotations

import posixpath
from typing import Any


def tidy(event: Any) -> dict[str, Any] | None:
    path = event.payload.get("tool_input", {}).get("file_path")
    if not isinstance(path, str):
        return None
    tidy_path = posixpath.normpath(path)
    if tidy_path == path:
        return None
    return {"updated": {"tool_input": {"file_path": tidy_path}}}
