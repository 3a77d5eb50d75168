"""The approval audit trail: every operator's answer as the fleet's change history holds it.

An answer is recorded in the hash-chained change history (:mod:`hookbus.bundles.history`)
as it is given: who, when, from where (console or CLI), the outcome, and the sha256 of the
exact input it applied to. :func:`answers` reads those entries back as flat records, each
with the chain's ``hash`` and ``prev`` so that a copy can be checked against the chain
later; ``hookbus approvals export`` writes them as JSON lines.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from hookbus.bundles import history

if TYPE_CHECKING:
    import redis

#: The change-history action of an operator's answer.
DECIDE = "decide"


def answers(client: redis.Redis, namespace: str, *, since_ms: int = 0) -> Iterator[dict[str, Any]]:
    """The operators' answers recorded at or after ``since_ms`` (epoch ms), oldest first."""
    for entry in history.read(client, namespace):
        if entry.action != DECIDE or entry.at < since_ms:
            continue
        extra = entry.extra
        yield {
            "at_ms": entry.at,
            "at": datetime.fromtimestamp(entry.at / 1000, tz=UTC).isoformat(),
            "approval": extra.get("approval"),
            "by": entry.actor,
            "outcome": extra.get("outcome"),
            "via": extra.get("via") or None,
            "input_sha256": extra.get("input_sha256"),
            "agent": extra.get("agent"),
            "session": extra.get("session"),
            "kind": extra.get("kind"),
            "tool": extra.get("tool"),
            "hook": entry.hook,
            "waited_ms": extra.get("waited_ms"),
            "note": extra.get("note"),
            "allowed_by": extra.get("allowed_by", []),
            "approvers": extra.get("approvers"),
            "history_id": entry.id,
            "hash": entry.hash,
            "prev": entry.prev,
        }


def parse_since(text: str, now_ms: int) -> int:
    """``--since``: a duration back from now (``24h``, ``7d``) or an ISO 8601 date or time
    (UTC when it names no zone), as epoch ms. ValueError says which forms are accepted."""
    from hookbus.state.templates import parse_duration

    try:
        return now_ms - parse_duration(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{text!r} is neither a duration (30m, 24h, 7d) nor an ISO date or time "
            "(2026-12-01, 2026-12-01T09:30:00+01:00)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)
