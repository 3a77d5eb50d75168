"""Append one JSON line per tool call to ``$DEMO_TELEMETRY_FILE`` (the demo's telemetry)."""

from __future__ import annotations

import json
import os
from typing import Any


def record(event: Any) -> None:
    path = os.environ.get("DEMO_TELEMETRY_FILE")
    if not path:
        return
    line = {
        "agent": event.agent_id,
        "session": event.session_id,
        "tool": event.payload.get("tool_name"),
        "duration_ms": event.payload.get("duration_ms"),
    }
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")
