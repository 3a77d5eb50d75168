"""Keyword routing hints for PromptSubmit: the signal payloads of seed 001 §3.3."""

from __future__ import annotations

import re
from typing import Any

#: (regex over the prompt, ability id, why) — compiled once at import.
RULES: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (
        re.compile(r"\b(refactor|clean ?up|tidy)\b", re.I),
        "refactor_code",
        "the prompt asks to restructure code",
    ),
    (
        re.compile(r"\b(tests?|pytest|failing|flaky)\b", re.I),
        "run_tests",
        "the prompt mentions tests",
    ),
    (
        re.compile(r"\b(commit|pre-commit|lint)\b", re.I),
        "pre_commit_checks",
        "the prompt mentions committing or linting",
    ),
)


def suggest(event: Any) -> dict[str, Any] | None:
    """Return routing_hint signals for the abilities the prompt seems to need."""
    prompt = str(event.payload.get("prompt", ""))
    found = [
        {"id": ability, "reason": why, "confidence": 0.8}
        for pattern, ability, why in RULES
        if pattern.search(prompt)
    ]
    if not found:
        return None
    return {
        "signals": [
            {
                "kind": "routing_hint",
                "code": "ROUTE_SUGGESTION",
                "payload": {"suggested_abilities": found},
            }
        ]
    }
