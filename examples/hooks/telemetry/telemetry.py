"""PostToolUse telemetry: one JSON line per tool call, appended to a file."""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ENV_VAR = "HOOKBUS_TELEMETRY_FILE"
DEFAULT_NAME = "hookbus-telemetry.jsonl"
_lock = threading.Lock()


def telemetry_path() -> Path:
    """Where lines go: $HOOKBUS_TELEMETRY_FILE, else the system temp dir."""
    configured = os.environ.get(ENV_VAR)
    return Path(configured) if configured else Path(tempfile.gettempdir()) / DEFAULT_NAME


def record(event: Any) -> None:
    """Append the line; answer nothing (PostToolUse hooks are infra-only)."""
    payload = event.payload
    line = {
        "ts_ms": event.ts,
        "recorded_ms": int(time.time() * 1000),
        "event_id": event.id,
        "session_id": event.session_id,
        "agent_id": event.agent_id,
        "tool_name": payload.get("tool_name"),
        "status": payload.get("status"),
        "duration_ms": payload.get("duration_ms"),
    }
    path = telemetry_path()
    text = json.dumps(line, separators=(",", ":")) + "\n"
    with _lock, path.open("a", encoding="utf-8") as fh:
        fh.write(text)
