"""Reading the event log and the decision log as they grow (``hookbus tail``).

The ``events`` and ``decisions`` streams, each entry made into one flat
:class:`~hookbus.bus.tail.entry.TailEntry` (:mod:`hookbus.bus.tail.entry`): this module reads
the last few (``XREVRANGE``) and follows new ones (``XREAD BLOCK``, from ``$`` or from where
the last read stopped, so nothing between two reads is lost). Filtering by kind and agent
happens here, not in Redis: streams have no index. A decision-log entry may hold several
decisions (:mod:`hookbus.bus.decision_batch`); each is shown as its own line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, cast

from hookbus.bus.connection import client_url, translated
from hookbus.bus.decision_batch import expand
from hookbus.bus.tail.entry import TailEntry, decision_entry, entry_text, event_entry

if TYPE_CHECKING:
    import redis

    from hookbus.bus.keys import Keys

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


def last(client: redis.Redis, keys: Keys, *, decisions: bool, n: int) -> list[TailEntry]:
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
