"""Reading the event log and the decision log as they grow (``hookbus tail``).

Two streams tell what a fleet does: ``events`` (every published, non-blocking event: one
field ``e``, the msgpack :class:`Event`) and ``decisions`` (one entry per answered blocking
request, written by the chain worker's Lua script, and one ``type = hook_run`` entry per
non-blocking hook run, written by the RQ job). This module turns entries of either into one
flat :class:`TailEntry`, reads the last few (``XREVRANGE``) and follows new ones (``XREAD
BLOCK``, from ``$`` or from where the last read stopped, so nothing between two reads is
lost). Filtering by kind and agent happens here, not in Redis: streams have no index.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, cast

import msgspec

from hookbus.bus.connection import client_url, translated
from hookbus.bus.wire import Decision, Event, decode
from hookbus.errors import WireError

if TYPE_CHECKING:
    import redis

    from hookbus.bus.keys import Keys

#: How long one blocking read waits before the caller may check whether to stop, in ms.
DEFAULT_BLOCK_MS = 1_000
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


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _fields(raw: dict[Any, Any]) -> dict[str, Any]:
    return {_text(k): v for k, v in raw.items()}


def _duration_ms(value: Any) -> float | None:
    try:
        return int(_text(value)) / 1000
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
        "kind": _text(f.get("kind", b"")),
        "agent": _text(f.get("agent", b"")),
        "session": _text(f.get("session", b"")),
        "id": _text(f.get("id", b"")),
        "outcome": _text(f.get("outcome", b"")),
        "worker": _text(f.get("worker", b"")),
        "duration_ms": _duration_ms(f.get("duration_us")),
    }
    if _text(f.get("type", b"")) == HOOK_RUN_TYPE:
        return TailEntry(
            source=HOOK_RUN_TYPE,
            hook=_text(f.get("hook", b"")),
            error=_text(f.get("error", b"")),
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
    degraded = _text(f.get("degraded", b"0")) in ("1", "true")
    return TailEntry(
        source="decision", reason=reason, hook=hook, degraded=degraded, shadow=shadow, **common
    )


def _deciding_hook(decision: Decision) -> str:
    for run in reversed(decision.trace):
        if run.outcome not in ("continue", "allow", "skipped"):
            return run.hook_id
    return ""


class TailFilter:
    """Which entries to show: kinds (canonical names) and agent ids; empty = all."""

    def __init__(self, kinds: Iterable[str] = (), agents: Iterable[str] = ()) -> None:
        self.kinds = frozenset(kinds)
        self.agents = frozenset(agents)

    def __call__(self, entry: TailEntry) -> bool:
        if self.kinds and entry.kind not in self.kinds:
            return False
        return not self.agents or entry.agent in self.agents


def _stream_and_parser(
    keys: Keys, decisions: bool
) -> tuple[str, Callable[[str, dict[Any, Any]], TailEntry]]:
    return (keys.decisions, decision_entry) if decisions else (keys.events, event_entry)


def last(client: redis.Redis, keys: Keys, *, decisions: bool, n: int) -> list[TailEntry]:
    """The last ``n`` entries of the log, oldest first (before any filter)."""
    stream, parse = _stream_and_parser(keys, decisions)
    if n <= 0:
        return []
    with translated(client_url(client)):
        page = cast("list[Any]", client.xrevrange(stream, count=n))
    return [parse(_text(entry_id), raw) for entry_id, raw in reversed(page)]


def follow(
    client: redis.Redis,
    keys: Keys,
    *,
    decisions: bool,
    after: str = "$",
    block_ms: int = DEFAULT_BLOCK_MS,
    stop: Callable[[], bool] = lambda: False,
) -> Iterator[TailEntry]:
    """New entries as they are appended, after ``after`` (``$``: from now); checks ``stop``
    at least every ``block_ms``. The position is kept between reads, so a burst between
    two reads is not lost."""
    stream, parse = _stream_and_parser(keys, decisions)
    position = after
    if position == "$":  # pin "now" to an id, or each XREAD would skip what came between
        with translated(client_url(client)):
            newest = cast("list[Any]", client.xrevrange(stream, count=1))
        position = _text(newest[0][0]) if newest else "0-0"
    while not stop():
        with translated(client_url(client)):
            reply = cast(
                "list[Any]", client.xread({stream: position}, count=100, block=max(1, block_ms))
            )
        for _, entries in reply or []:
            for entry_id, raw in entries:
                position = _text(entry_id)
                yield parse(position, raw)
