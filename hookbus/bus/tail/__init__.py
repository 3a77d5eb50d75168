"""Reading the event log and the decision log as they grow, for ``hookbus tail``.

Two streams tell what a fleet does: ``events`` (every published, non-blocking event: one
field ``e``, the msgpack :class:`Event`) and ``decisions`` (one entry per answered blocking
request, written by the chain worker's Lua script, and one ``type = hook_run`` entry per
non-blocking hook run, written by the RQ job). Each entry becomes one flat
:class:`TailEntry` (:func:`event_entry`, :func:`decision_entry`); a decision-log entry may
hold several decisions (:mod:`hookbus.bus.decision_batch`), each shown as its own line.

One stream is read by :func:`stream_last` (the last few, ``XREVRANGE``) and
:func:`stream_follow` (new ones, ``XREAD BLOCK`` from ``$`` or from where the last read
stopped, so nothing between two reads is lost). Filtering by kind and agent
(:class:`TailFilter`) happens here, not in Redis: streams have no index.

With ``partitions`` > 1 each session's events are in the stream of its partition, so a tail
of partition 0 alone would miss the rest: :func:`last` and :func:`follow` read every
partition (:func:`targets`) and merge them, the last entries in Redis-time order and the new
ones as they arrive, one following thread per partition (a Redis Cluster forbids one
``XREAD`` over streams of several slots, and a partition may live on another master). One
session's entries keep their order (they are in one stream); entries of different
partitions appear in the order they were read. With one partition it is
:func:`stream_follow` itself.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import TYPE_CHECKING, Any, cast

import msgspec

from hookbus.bus.connection import (
    bus_client,
    client_url,
    is_cluster_url,
    partition_client,
    translated,
)
from hookbus.bus.decision_batch import expand
from hookbus.bus.keys import Keys
from hookbus.bus.wire import Decision, Event, decode
from hookbus.errors import WireError

if TYPE_CHECKING:
    import redis

    from hookbus.bus.settings.loader import Settings


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


#: How long one blocking read waits before the caller may check whether to stop, in ms.
DEFAULT_BLOCK_MS = 1_000


class TailFilter:
    """Which entries to show: kinds (canonical names) and agent ids; empty = all."""

    def __init__(self, kinds: Iterable[str] = (), agents: Iterable[str] = ()) -> None:
        self.kinds = frozenset(kinds)
        self.agents = frozenset(agents)

    def __call__(self, entry: TailEntry) -> bool:
        if self.kinds and entry.kind not in self.kinds:
            return False
        return not self.agents or entry.agent in self.agents


def _decision_entries(entry_id: str, raw: dict[Any, Any]) -> list[TailEntry]:
    return [decision_entry(entry_id, record) for record in expand(raw)]


def _event_entries(entry_id: str, raw: dict[Any, Any]) -> list[TailEntry]:
    return [event_entry(entry_id, raw)]


def _stream_and_parser(
    keys: Keys, decisions: bool
) -> tuple[str, Callable[[str, dict[Any, Any]], list[TailEntry]]]:
    return (keys.decisions, _decision_entries) if decisions else (keys.events, _event_entries)


def stream_last(client: redis.Redis, keys: Keys, *, decisions: bool, n: int) -> list[TailEntry]:
    """The last ``n`` entries of the log, oldest first (before any filter)."""
    stream, parse = _stream_and_parser(keys, decisions)
    if n <= 0:
        return []
    with translated(client_url(client)):
        page = cast("list[Any]", client.xrevrange(stream, count=n))
    shown: list[TailEntry] = []
    for entry_id, raw in reversed(page):
        shown.extend(parse(entry_text(entry_id), raw))
    return shown[-n:]


def stream_follow(
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
        position = entry_text(newest[0][0]) if newest else "0-0"
    while not stop():
        with translated(client_url(client)):
            reply = cast(
                "list[Any]", client.xread({stream: position}, count=100, block=max(1, block_ms))
            )
        for _, entries in reply or []:
            for entry_id, raw in entries:
                position = entry_text(entry_id)
                yield from parse(position, raw)


#: How often the merging loop checks whether to stop while no entry arrives, in seconds.
POLL_S = 0.1
#: How long stopping waits for the following threads (each wakes every block), in seconds.
JOIN_S = 2.0


class Target:
    """One partition's log as the tail reads it: the client of its master and its keys."""

    __slots__ = ("client", "keys")

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys


def targets(settings: Settings) -> list[Target]:
    """Every partition of the namespace, each with the client that serves it (on a cluster
    the master of its slot; on one server one client for all)."""
    own = bus_client(settings)
    on_cluster = is_cluster_url(settings.effective_redis_url)
    return [
        Target(
            partition_client(settings, p) if on_cluster and p else own,
            Keys.for_partition(settings.namespace, p),
        )
        for p in range(settings.partitions)
    ]


def last(parts: list[Target], *, decisions: bool, n: int) -> tuple[list[TailEntry], list[str]]:
    """The last ``n`` entries over every partition, oldest first, and where each
    partition's follow should start (its newest entry read, else ``$``)."""
    merged: list[tuple[int, int, TailEntry]] = []
    after: list[str] = []
    for index, part in enumerate(parts):
        entries = stream_last(part.client, part.keys, decisions=decisions, n=n)
        after.append(entries[-1].entry_id if entries else "$")
        merged += [(_order(e.entry_id), index, e) for e in entries]
    merged.sort(key=lambda item: (item[0], item[1]))
    newest = [entry for _, _, entry in merged]
    return (newest[-n:] if n > 0 else []), after


def _order(entry_id: str) -> int:
    ms, _, seq = entry_id.partition("-")
    return int(ms) * 1_000_000 + int(seq or 0)


def follow(
    parts: list[Target],
    *,
    decisions: bool,
    after: list[str],
    stop: Callable[[], bool] = lambda: False,
) -> Generator[TailEntry, None, None]:
    """New entries of every partition as they are appended, after ``after[p]`` for
    partition ``p``; ends when ``stop()`` is true (checked at least every
    :data:`POLL_S`) or when the caller stops iterating. A partition that cannot be read
    raises its error here."""
    if len(parts) == 1:
        yield from stream_follow(
            parts[0].client, parts[0].keys, decisions=decisions, after=after[0], stop=stop
        )
        return
    arrived: queue.Queue[TailEntry | BaseException] = queue.Queue()
    finished = threading.Event()

    def read(part: Target, start: str) -> None:
        try:
            for entry in stream_follow(
                part.client, part.keys, decisions=decisions, after=start, stop=finished.is_set
            ):
                arrived.put(entry)
        except BaseException as exc:  # handed to the caller's thread, raised there
            arrived.put(exc)

    threads = [
        threading.Thread(target=read, args=(part, start), name=f"tail-p{i}", daemon=True)
        for i, (part, start) in enumerate(zip(parts, after, strict=True))
    ]
    for thread in threads:
        thread.start()
    try:
        while not stop():
            try:
                item = arrived.get(timeout=POLL_S)
            except queue.Empty:
                continue
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        finished.set()
        for thread in threads:
            thread.join(JOIN_S)
