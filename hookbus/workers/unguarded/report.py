"""Unguarded tool calls as the fleet keeps them: recorded by the fan-out's watch, read by
``hookbus status``, ``/metrics`` and the console.

Each partition keeps its own (a session's calls are in its partition): a capped stream of
the latest calls (:data:`KEEP` of them) and a hash of counts per agent and CLI. Readers
merge the partitions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis

from hookbus.bus.keys import Keys
from hookbus.bus.wire import Event

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings

#: Latest unguarded calls kept per partition (about; the stream is trimmed with ``~``).
KEEP = 1_000
_SEP = "\x1f"


@dataclass(frozen=True)
class UnguardedCall:
    """One tool call that ran with no guard asked."""

    agent: str
    session: str
    tool: str
    cli: str
    at_ms: int
    event_id: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "session": self.session,
            "tool": self.tool,
            "cli": self.cli,
            "at": self.at_ms,
            "event_id": self.event_id,
        }


def _cli(event: Event) -> str:
    harness = event.meta.get("harness")
    return harness if isinstance(harness, str) and harness else "sdk"


def record_unguarded(client: redis.Redis, keys: Keys, events: Iterable[Event]) -> None:
    """Append ``events`` (post events of calls no guard was asked about) and count them,
    in one round trip."""
    pipe = client.pipeline(transaction=False)
    for event in events:
        tool = event.payload.get("tool_name")
        fields: dict[str, str | int] = {
            "agent": event.agent_id or "",
            "session": event.session_id or "",
            "tool": tool if isinstance(tool, str) else "",
            "cli": _cli(event),
            "at": event.ts,
            "event": event.id,
        }
        pipe.xadd(keys.unguarded_calls(), fields, maxlen=KEEP, approximate=True)  # type: ignore[arg-type]
        pipe.hincrby(keys.unguarded_counts(), f"{event.agent_id or ''}{_SEP}{_cli(event)}", 1)
    pipe.execute()


def _text(fields: dict[bytes, bytes], name: bytes) -> str:
    return fields.get(name, b"").decode("utf-8", "replace")


def _partition_clients(client: redis.Redis, settings: Settings) -> list[tuple[redis.Redis, Keys]]:
    from hookbus.bus.connection import is_cluster_url, partition_client

    on_cluster = is_cluster_url(settings.effective_redis_url)
    out = []
    for partition in range(settings.partitions):
        here = partition_client(settings, partition) if on_cluster and partition else client
        out.append((here, Keys.for_partition(settings.namespace, partition)))
    return out


def recent(client: redis.Redis, settings: Settings, limit: int = 20) -> list[UnguardedCall]:
    """The latest ``limit`` unguarded calls of every partition, newest first."""
    calls: list[UnguardedCall] = []
    for here, keys in _partition_clients(client, settings):
        entries: list[tuple[bytes, dict[bytes, bytes]]] = here.xrevrange(  # type: ignore[assignment]
            keys.unguarded_calls(), count=limit
        )
        for _, fields in entries:
            try:
                at = int(fields.get(b"at", b"0"))
            except ValueError:
                at = 0
            calls.append(
                UnguardedCall(
                    agent=_text(fields, b"agent"),
                    session=_text(fields, b"session"),
                    tool=_text(fields, b"tool"),
                    cli=_text(fields, b"cli"),
                    at_ms=at,
                    event_id=_text(fields, b"event"),
                )
            )
    calls.sort(key=lambda call: call.at_ms, reverse=True)
    return calls[:limit]


def counts(client: redis.Redis, settings: Settings) -> dict[tuple[str, str], int]:
    """Unguarded calls counted per (agent, CLI), every partition added up."""
    total: dict[tuple[str, str], int] = {}
    for here, keys in _partition_clients(client, settings):
        raw: dict[bytes, bytes] = here.hgetall(keys.unguarded_counts())  # type: ignore[assignment]
        for field, value in raw.items():
            agent, _, cli = field.decode("utf-8", "replace").partition(_SEP)
            try:
                total[(agent, cli)] = total.get((agent, cli), 0) + int(value)
            except ValueError:
                continue
    return total
