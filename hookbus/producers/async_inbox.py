"""The asyncio client's reply inbox: one stream per client, read by one task.

Every request of one :class:`~hookbus.producers.async_client.AsyncHookBus` names the same
reply key, ``hookbus:{ns}:inbox:<producer id>``; workers add ``id=<request id>
d=<decision>`` entries to it. One reader task drives one connection of its own by hand:
XREAD BLOCK on the inbox, with an XTRIM of what was consumed riding in the same write once
every ``INBOX_TRIM_EVERY`` replies, and hands each decoded decision to the future waiting
under the ``request_id`` it carries, else
under the entry's id (workers that predate request ids; undecodable entries, which the call
answers by policy). So two calls in flight for the same :class:`Event` each get their own
answer whatever id the worker files the entry under. Entries nobody waits for (late
replies of calls already answered by policy) are dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import redis.asyncio
import redis.exceptions

from hookbus.bus import reqrep, resp
from hookbus.bus.connection import CONNECT_TIMEOUT_S, no_handshake_kwargs
from hookbus.bus.wire import Decision
from hookbus.errors import WireError
from hookbus.producers.inbox_ttl import InboxTTL

log = logging.getLogger(__name__)

#: How long the inbox reader blocks per XREAD, in ms (only bounds shutdown latency).
INBOX_BLOCK_MS = 1_000
#: Socket timeout of the inbox reader's blocking read, in seconds.
INBOX_READ_TIMEOUT_S = INBOX_BLOCK_MS / 1000 + 5.0
#: Entries read per XREAD of the inbox.
INBOX_READ_COUNT = 1_000
#: Replies read between two XTRIMs of what was read (the sync client's figure: an
#: approximate MINID trim frees only whole stream nodes, about a hundred entries each).
INBOX_TRIM_EVERY = 100
#: Backoff of the inbox reader after a Redis error, in seconds (doubled up to the cap).
INBOX_BACKOFF_MIN_S = 0.05
INBOX_BACKOFF_MAX_S = 1.0

IO_ERRORS: tuple[type[BaseException], ...] = (
    redis.exceptions.RedisError,
    ConnectionError,
    OSError,
)


class InboxReader:
    """Resolves ``waiting[request id]`` futures from the inbox stream ``inbox``."""

    def __init__(
        self,
        url: str,
        inbox: str,
        waiting: dict[bytes, asyncio.Future[Decision | WireError]],
        name: str,
        inbox_ttl: InboxTTL | None = None,
        routing: dict[str, Any] | None = None,
    ) -> None:
        self.url = url
        #: Pool options that make the reader follow its slot on a cluster.
        self.routing = routing or {}
        self.inbox = inbox
        #: Told when the reader lost its connection (the server may have restarted and
        #: lost the inbox: the next request's write recreates it).
        self.inbox_ttl = inbox_ttl
        self.waiting = waiting
        self.name = name
        self.last_id = b"0-0"
        #: entries read since the last XTRIM of the inbox
        self._read_since_trim = 0
        self._client: redis.asyncio.Redis | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        #: parked requests' ids -> a later entry that came while nobody waited (the final
        #: answer can arrive in the same read as the first reply)
        self._parked: dict[bytes, Decision | WireError | None] = {}

    def after_parked(self, ids: set[bytes]) -> Decision | WireError | None:
        """Mark ``ids`` as a parked request's; the final entry if it came already."""
        early = None
        for key in ids:
            early = early or self._parked.get(key)
            self._parked[key] = None
        return early

    def forget_parked(self, ids: set[bytes]) -> None:
        for key in ids:
            self._parked.pop(key, None)

    @property
    def started(self) -> bool:
        """Whether a reader ever ran (then the inbox may exist and should be deleted)."""
        return self._client is not None

    def ensure_running(self) -> None:
        """Start the reader task on the running loop unless it runs already."""
        if self._task is not None and not self._task.done():
            return
        if self._client is None:
            self._client = redis.asyncio.Redis.from_url(
                self.url,
                protocol=2,
                max_connections=1,
                socket_connect_timeout=CONNECT_TIMEOUT_S,
                socket_timeout=INBOX_READ_TIMEOUT_S,
                socket_keepalive=True,
                **no_handshake_kwargs(),
                **self.routing,
            )
        self._task = asyncio.get_running_loop().create_task(self._run(self._client), name=self.name)

    async def stop(self) -> None:
        """Cancel the reader and close its connection."""
        self._stopping = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, *IO_ERRORS):
                await task
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def _run(self, client: redis.asyncio.Redis) -> None:
        pool = client.connection_pool
        conn = await pool.get_connection()  # type: ignore[no-untyped-call]
        backoff = INBOX_BACKOFF_MIN_S
        trimmed_id = self.last_id
        self._read_since_trim = 0
        try:
            while not self._stopping:
                commands = []
                if self._read_since_trim >= INBOX_TRIM_EVERY and trimmed_id != self.last_id:
                    commands.append(resp.pack("XTRIM", self.inbox, "MINID", "~", self.last_id))
                    trimmed_id = self.last_id
                    self._read_since_trim = 0
                commands.append(
                    resp.pack(
                        "XREAD",
                        "COUNT",
                        INBOX_READ_COUNT,
                        "BLOCK",
                        INBOX_BLOCK_MS,
                        "STREAMS",
                        self.inbox,
                        self.last_id,
                    )
                )
                try:
                    await conn.send_packed_command([b"".join(commands)], check_health=False)
                    replies = []
                    for _ in commands:
                        try:
                            replies.append(await conn.read_response(timeout=INBOX_READ_TIMEOUT_S))
                        except redis.exceptions.ResponseError as exc:
                            replies.append(exc)
                    found: Any = replies[-1]
                    if isinstance(found, BaseException):
                        raise found
                    backoff = INBOX_BACKOFF_MIN_S
                except asyncio.CancelledError:
                    raise
                except IO_ERRORS as exc:
                    log.debug("inbox reader: %s; retrying in %.2f s", exc, backoff)
                    if self.inbox_ttl is not None:
                        self.inbox_ttl.forget()
                    await conn.disconnect()
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, INBOX_BACKOFF_MAX_S)
                    continue
                if found:
                    self._read_since_trim += len(found[0][1])
                    self.deliver(found[0][1])
        finally:
            await conn.disconnect()
            await pool.release(conn)

    def deliver(self, entries: list[Any]) -> None:
        """Resolve the waiting requests of raw inbox entries ``[id, [field, value, ...]]``."""
        waiting = self.waiting
        for entry_id, flat in entries:
            self.last_id = entry_id
            if not flat:
                continue
            fields = dict(zip(flat[::2], flat[1::2], strict=False))
            reply = reqrep.decode_reply(fields.get(reqrep.INBOX_DECISION_FIELD, b""))
            future = None
            if isinstance(reply, Decision) and reply.request_id:
                future = waiting.get(reply.request_id.encode())
            if future is None or future.done():
                future = waiting.get(fields.get(reqrep.INBOX_ID_FIELD, b""))
            if future is not None and not future.done():
                future.set_result(reply)
            elif future is not None and isinstance(reply, Decision) and _is_parked(future):
                # a parked request's final answer in the same read as its first reply:
                # kept for the call, which has not yet asked for it
                self._parked[(reply.request_id or "").encode()] = reply


def _is_parked(future: asyncio.Future[Decision | WireError]) -> bool:
    """Whether a resolved future holds a parked request's first reply."""
    result = future.result()
    return isinstance(result, Decision) and result.parked
