"""The asyncio client's request sender: XADDs queued in one loop turn go out in one write.

Auto-pipelining cuts the client's per-request cost (one write and one parse for a whole
burst; redis-py's command packing and pipeline were the client's largest per-request cost,
so the commands are packed by hand) and, unlike a cancelled redis-py call, a request whose
deadline passes while its XADD is in flight never tears down a connection. A batch's
connect, write and reads share one bound (:data:`SEND_TIMEOUT_S`), so a stalled server
never pins the sender: the next batch goes out on a fresh connection. When the client's inbox
is due for renewal (:mod:`hookbus.producers.inbox_ttl`), its keepalive leads the batch's
write, so the inbox exists before any of the batch's replies can arrive.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import redis.asyncio
import redis.exceptions

from hookbus.bus import resp
from hookbus.bus.connection import CONNECT_TIMEOUT_S
from hookbus.bus.policy.backlog import BacklogGate
from hookbus.bus.resp import mask_url
from hookbus.errors import RedisUnavailable
from hookbus.producers.async_inbox import IO_ERRORS
from hookbus.producers.inbox_ttl import RENEWAL_REPLIES, InboxTTL, renewal_failure

#: Most time one batch of XADDs may take (connect, write, read every reply), in seconds.
SEND_TIMEOUT_S = CONNECT_TIMEOUT_S

_Batch = list[tuple[bytes, float, "asyncio.Future[None]"]]


class RequestOutbox:
    """Queues request entries and sends them in batches on ``client``'s pool.

    ``xadd_head`` is every request's XADD up to its data, packed once; ``inbox_ttl`` keeps
    the inbox the requests name alive.
    """

    def __init__(
        self,
        client: redis.asyncio.Redis,
        url: str,
        xadd_head: bytes,
        inbox_ttl: InboxTTL | None = None,
        gate: BacklogGate | None = None,
    ) -> None:
        self.client = client
        self.url = url
        self.xadd_head = xadd_head
        self.inbox_ttl = inbox_ttl
        #: The request stream's backlog gate: its XLEN, when due, rides with a batch.
        self.gate = gate
        self._queue: _Batch = []
        self._sender: asyncio.Task[None] | None = None

    async def send(self, data: bytes, budget_ms: float = 0.0) -> None:
        """XADD ``data`` (a request with ``budget_ms`` to live) with whatever else this loop
        turn queues; raises what Redis said."""
        sent: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # a request abandoned at its deadline no longer awaits this: mark errors as seen
        sent.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._queue.append((data, budget_ms, sent))
        if self._sender is None or self._sender.done():
            self._sender = asyncio.get_running_loop().create_task(self._drain())
        await sent  # cancelled at the deadline: the sender skips futures already done

    async def finish(self, timeout_s: float) -> None:
        """Give queued XADDs up to ``timeout_s`` to go out (closing the client)."""
        sender, self._sender = self._sender, None
        if sender is not None and not sender.done():
            with contextlib.suppress(asyncio.CancelledError, TimeoutError, *IO_ERRORS):
                await asyncio.wait_for(sender, timeout_s)

    async def _drain(self) -> None:
        while self._queue:
            await asyncio.sleep(0)  # let the other requests of this loop turn queue up
            batch, self._queue = self._queue, []
            packed = b"".join(self.xadd_head + resp.bulk(data) for data, _, _ in batch)
            renewal = None
            if self.inbox_ttl is not None:
                renewal = self.inbox_ttl.renewal(max(budget for _, budget, _ in batch))
            look = self.gate.check() if self.gate is not None else None
            if look is not None:
                packed += resp.pack(*look)
            try:
                async with asyncio.timeout(SEND_TIMEOUT_S):
                    count = (
                        len(batch)
                        + (RENEWAL_REPLIES if renewal is not None else 0)
                        + (look is not None)
                    )
                    results = await self._write((renewal or b"") + packed, count)
            except TimeoutError:
                self._forget_renewal()
                stalled = f"no answer to XADD within {SEND_TIMEOUT_S:g} s"
                _fail(batch, RedisUnavailable(mask_url(self.url), stalled))
                continue
            except IO_ERRORS as exc:
                self._forget_renewal()  # the server may have restarted without the inbox
                _fail(batch, exc)
                continue
            if look is not None and self.gate is not None:
                self.gate.take(results.pop())
            if self.gate is not None:
                self.gate.added(len(batch))
            if renewal is not None:
                renewed, results = results[:RENEWAL_REPLIES], results[RENEWAL_REPLIES:]
                failed = renewal_failure(renewed)
                if failed is not None:  # replies would be dropped: fail now
                    self._forget_renewal()
                    _fail(batch, failed)
                    continue
            for (_, _, sent), result in zip(batch, results, strict=True):
                if sent.done():
                    continue
                if isinstance(result, BaseException):
                    sent.set_exception(result)
                else:
                    sent.set_result(None)

    def _forget_renewal(self) -> None:
        if self.inbox_ttl is not None:
            self.inbox_ttl.forget()

    async def _write(self, packed: bytes, count: int) -> list[Any]:
        """One write of ``count`` packed XADDs on a pooled connection; their replies (a
        refused command's error in its place)."""
        pool = self.client.connection_pool
        conn = await pool.get_connection()  # type: ignore[no-untyped-call]
        try:
            await conn.send_packed_command([packed], check_health=False)
            results: list[Any] = []
            for _ in range(count):
                try:
                    results.append(await conn.read_response())
                except redis.exceptions.ResponseError as exc:
                    results.append(exc)
            return results
        except BaseException:
            await conn.disconnect()  # replies may be left unread on it
            raise
        finally:
            await pool.release(conn)


def _fail(batch: _Batch, error: BaseException) -> None:
    for _, _, sent in batch:
        if not sent.done():
            sent.set_exception(error)
