"""The dead-letter page reads as facts for both shapes a dead letter has: a failed fan-out
job of RQ's registry (hook, traceback, the events of its pack) and an entry of a
dead-letter stream (no hook, no traceback, an event that may not decode)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import hookbus.console
from hookbus.console.render import Renderer

TEMPLATES = Path(hookbus.console.__file__).parent / "templates"


def render(job: dict[str, Any]) -> str:
    return Renderer(TEMPLATES).render("dead_one.html", {"path": "/dead/x", "csrf": "", "job": job})


def test_a_failed_fanout_job_shows_its_hook_traceback_and_each_event() -> None:
    page = render(
        {
            "id": "job-1", "hook": "audit-log", "event": "e1", "kind": "PostToolUse",
            "events": 2, "failed_at": "2026-12-04T14:00:00+00:00", "error": "ValueError: bad",
            "tries": 3, "traceback": "Traceback ...\nValueError: bad", "description": "audit",
            "enqueued_at": None, "meta": {"hook": "audit-log", "batch_size": 2},
            "in_registry": True,
            "events_data": [
                {"id": "e1", "kind": "PostToolUse", "payload": {"tool_name": "Bash"}},
                {"id": "e2", "kind": "PostToolUse", "agent_id": "ci-3", "session_id": "s9"},
            ],
        }
    )  # fmt: skip
    assert "audit-log" in page and "ValueError: bad" in page and "<h2>Traceback</h2>" in page
    assert "Events it carried" in page and "ci-3" in page and "s9" in page and "Bash" in page


def test_a_stream_dead_letter_whose_event_does_not_decode_says_so() -> None:
    page = render(
        {
            "id": "dl-0-1-0", "hook": None, "event": None, "kind": None, "events": 1,
            "failed_at": "2026-12-04T14:00:00+00:00", "error": "too many deliveries",
            "tries": 6, "traceback": None, "description": "chain entry 1-0",
            "enqueued_at": None, "meta": {"reason": "too many deliveries", "worker": ""},
            "in_registry": True, "events_data": [{"undecodable": 17}],
        }
    )  # fmt: skip
    assert "no hook ran" in page and "17 bytes that do not decode" in page
    assert "Traceback" not in page
