"""One line of ``hookbus tail``: an entry of the event log or the decision log, made flat.

Two streams tell what a fleet does: ``events`` (every published, non-blocking event: one
field ``e``, the msgpack :class:`Event`) and ``decisions`` (one entry per answered blocking
request, written by the chain worker's Lua script, and one ``type = hook_run`` entry per
non-blocking hook run, written by the RQ job). :func:`event_entry` and
:func:`decision_entry` turn an entry of either into one :class:`TailEntry`; reading the
streams is :mod:`hookbus.bus.tail.reader`.
"""

from __future__ import annotations

from typing import Any

import msgspec

from hookbus.bus.wire import Decision, Event, decode
from hookbus.errors import WireError

#: The decision log's ``type`` of a non-blocking hook run (the chain's entries have none).
HOOK_RUN_TYPE = "hook_run"


class TailEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One line of ``hookbus tail``: an event, a decision or a hook run."""

    #: ``event``, ``decision`` (a blocking request's answer) or ``hook_run``.
    source: str
    #: The stream entry id (its first part is Redis time in ms at XADD).
    entry_id: str
    kind: str = ""
    agent: str = ""
    session: str = ""
    #: The event id (events, hook runs) or the request id (decisions).
    id: str = ""
    #: ``allow``/``deny``/``ask``/``halt`` for decisions, ``ok``/``error``... for hook runs.
    outcome: str = ""
    hook: str = ""
    reason: str = ""
    degraded: bool = False
    duration_ms: float | None = None
    worker: str = ""
    error: str = ""
    payload: dict[str, Any] | None = None
    #: What shadow hooks would have decided: ``{"hook", "outcome", "reason"}`` each.
    shadow: list[dict[str, Any]] = msgspec.field(default_factory=list)

    @property
    def ts_ms(self) -> int:
        """Redis time of the entry, in ms."""
        return int(self.entry_id.partition("-")[0])


def entry_text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _fields(raw: dict[Any, Any]) -> dict[str, Any]:
    return {entry_text(k): v for k, v in raw.items()}


def _duration_ms(value: Any) -> float | None:
    try:
        return int(entry_text(value)) / 1000
    except (TypeError, ValueError):
        return None


def event_entry(entry_id: str, raw: dict[Any, Any]) -> TailEntry:
    """A :class:`TailEntry` from an event-log entry (an undecodable one says so)."""
    data = _fields(raw).get("e", b"")
    try:
        event = decode(data if isinstance(data, bytes) else data.encode(), Event)
    except WireError as exc:
        return TailEntry(source="event", entry_id=entry_id, error=f"undecodable: {exc}")
    return TailEntry(
        source="event",
        entry_id=entry_id,
        kind=event.kind,
        agent=event.agent_id or "",
        session=event.session_id or "",
        id=event.id,
        payload=dict(event.payload),
    )


def decision_entry(entry_id: str, raw: dict[Any, Any]) -> TailEntry:
    """A :class:`TailEntry` from a decision-log entry (chain decision or hook run)."""
    f = _fields(raw)
    common: dict[str, Any] = {
        "entry_id": entry_id,
        "kind": entry_text(f.get("kind", b"")),
        "agent": entry_text(f.get("agent", b"")),
        "session": entry_text(f.get("session", b"")),
        "id": entry_text(f.get("id", b"")),
        "outcome": entry_text(f.get("outcome", b"")),
        "worker": entry_text(f.get("worker", b"")),
        "duration_ms": _duration_ms(f.get("duration_us")),
    }
    if entry_text(f.get("type", b"")) == HOOK_RUN_TYPE:
        return TailEntry(
            source=HOOK_RUN_TYPE,
            hook=entry_text(f.get("hook", b"")),
            error=entry_text(f.get("error", b"")),
            **common,
        )
    reason, hook = "", ""
    shadow: list[dict[str, Any]] = []
    blob = f.get("d")
    if isinstance(blob, bytes):
        try:
            decision = decode(blob, Decision)
        except WireError:
            decision = None
        if decision is not None:
            reason = decision.reason or ""
            hook = _deciding_hook(decision)
            shadow = [msgspec.to_builtins(run) for run in decision.shadow]
    degraded = entry_text(f.get("degraded", b"0")) in ("1", "true")
    return TailEntry(
        source="decision", reason=reason, hook=hook, degraded=degraded, shadow=shadow, **common
    )


def _deciding_hook(decision: Decision) -> str:
    for run in reversed(decision.trace):
        if run.outcome not in ("continue", "allow", "skipped"):
            return run.hook_id
    return ""
