"""The console's live feed: server-sent events from the decision logs and approvals logs.

Each open page holds one ``GET /api/stream``. The stream looks at every partition's
decision log and approvals log a few times a second (XREVRANGE/XRANGE after the last id
seen, through the library's clients) and sends ``decision`` and ``approval`` events as
they come; the page then refreshes the part it shows. So a new decision or approval is on
screen well within a second. Redis going away is an event too (``status``:
``reconnecting``), and the stream keeps trying; when Redis answers again it says ``ok``.
A comment line every few seconds keeps proxies from closing an idle stream.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool

from hookbus.approvals.inbox import ApprovalInbox
from hookbus.bus.connection import bus_client, partition_client, translated
from hookbus.bus.decision_batch import expand
from hookbus.bus.keys import Keys
from hookbus.console.decision_log import decision_row

if TYPE_CHECKING:
    from starlette.requests import Request

    from hookbus.bus.settings.loader import Settings

log = logging.getLogger(__name__)

#: How often the stream looks for news, in seconds.
POLL_S = 0.2
#: Pause after Redis failed before trying again, in seconds.
RETRY_S = 1.0
#: Seconds between keep-alive comments.
KEEPALIVE_S = 10.0
#: Most decision-log entries one poll sends one by one (more: one "skipped" event).
READ_ENTRIES = 20


class Feed:
    """One stream's read positions in every partition's decision log and approvals log."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.inbox = ApprovalInbox(settings)
        self.decisions: dict[int, bytes] = {}
        self.approvals: dict[int, bytes] = {}

    def start(self) -> None:
        """Remember where each log ends now: only what comes later is news."""
        for partition in range(self.settings.partitions):
            client = self._client(partition)
            stream = Keys.for_partition(self.settings.namespace, partition).decisions
            with translated(self.settings.effective_redis_url):
                last = client.xrevrange(stream, count=1)
            self.decisions[partition] = last[0][0] if last else b"0-0"
            self.approvals[partition] = self.inbox.log_tail(partition)

    def _client(self, partition: int) -> Any:
        if partition == 0:
            return bus_client(self.settings)
        return partition_client(self.settings, partition)

    def poll(self) -> list[tuple[str, dict[str, Any]]]:
        """The events since the last poll, oldest first: each new decision while there are
        few, and past :data:`READ_ENTRIES` log entries in one poll (a busy fleet) one
        ``decision`` event saying how many were skipped, the position moved to the end."""
        out: list[tuple[str, dict[str, Any]]] = []
        for partition in range(self.settings.partitions):
            stream = Keys.for_partition(self.settings.namespace, partition).decisions
            client = self._client(partition)
            after = b"(" + self.decisions[partition]
            with translated(self.settings.effective_redis_url):
                found = client.xrange(stream, after, "+", count=READ_ENTRIES)
                if len(found) >= READ_ENTRIES:
                    last = client.xrevrange(stream, count=1)
                    self.decisions[partition] = last[0][0] if last else self.decisions[partition]
                    out.append(("decision", {"partition": partition, "skipped": True}))
                    found = []
            for entry_id, fields in found:
                self.decisions[partition] = entry_id
                for record in expand(fields or {}):
                    out.append(("decision", decision_row(entry_id, record, partition)))
            mark, entries = self.inbox.log_since(partition, self.approvals[partition])
            self.approvals[partition] = mark
            out += [("approval", entry) for entry in entries]
        return out


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, default=str)}\n\n".encode()


async def events(request: Request, settings: Settings) -> AsyncIterator[bytes]:
    """The event stream of one page, until it disconnects."""
    feed = Feed(settings)
    started = False
    healthy: bool | None = None
    quiet = 0.0
    yield b"retry: 1000\n\n"
    while not await request.is_disconnected():
        try:
            if not started:
                await run_in_threadpool(feed.start)
                started = True
                news = []
            else:
                news = await run_in_threadpool(feed.poll)
            if healthy is not True:
                healthy = True
                yield _sse("status", {"redis": "ok"})
            for event, data in news:
                yield _sse(event, data)
            quiet = 0.0 if news else quiet + POLL_S
            if quiet >= KEEPALIVE_S:
                quiet = 0.0
                yield b": keep-alive\n\n"
            await asyncio.sleep(POLL_S)
        except Exception as exc:  # Redis restarting: say so, keep trying, never end
            if healthy is not False:
                healthy = False
                log.info("console feed: %s; reconnecting", exc)
                yield _sse("status", {"redis": "reconnecting", "error": str(exc)})
            await asyncio.sleep(RETRY_S)
