"""Suggest an ability from keywords in the prompt (the demo's routing hook)."""

from __future__ import annotations

from typing import Any

KEYWORDS = {"refactor": "refactor_code", "test": "run_tests", "deploy": "deploy_service"}


def hint(event: Any) -> dict[str, Any] | None:
    prompt = str(event.payload.get("prompt", "")).lower()
    found = [ability for word, ability in KEYWORDS.items() if word in prompt]
    if not found:
        return None
    return {
        "signals": [{"kind": "routing_hint", "code": a, "severity": "info"} for a in found],
        "context": [f"routing: consider {', '.join(found)}"],
    }
