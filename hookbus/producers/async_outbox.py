"""The asyncio client's request sender: XADDs queued in one loop turn go out in one write.

Auto-pipelining cuts the client's per-request cost (one write and one parse for a whole
burst; redis-py's command packing and pipeline were the client's largest per-request cost,
so the commands are packed by hand) and, unlike a cancelled redis-py call, a request whose
deadline passes while its XADD is in flight never tears down a connection. A batch's
connect, write and reads share one bound (:data:`SEND_TIMEOUT_S`), so a stalled server
never pins the sender: the next batch goes out on a fresh connection.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import redis.asyncio
import redis.exceptions

from hookbus.bus import reqrep
from hookbus.bus.connection import CONNECT_TIMEOUT_S
from hookbus.errors import RedisUnavailable
from hookbus.producers.async_inbox import IO_ERRORS

#: Most time one batch of XADDs may take (connect, write, read every reply), in seconds.
SEND_TIMEOUT_S = CONNECT_TIMEOUT_S

_Batch = list[tuple[bytes, "asyncio.Future[None]"]]


class RequestOutbox:
    """Queues request entries and sends them in batches on ``client``'s pool.

    ``xadd_head`` is every request's XADD up to its data, packed once.
    """

    def __init__(self, client: redis.asyncio.Redis, url: str, xadd_head: bytes) -> None:
        self.client = client
        self.url = url
        self.xadd_head = xadd_head
        self._queue: _Batch = []
        self._sender: asyncio.Task[None] | None = None

    async def send(self, data: bytes) -> None:
        """XADD ``data`` with whatever else this loop turn queues; raises what Redis said."""
        sent: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # a request abandoned at its deadline no longer awaits this: mark errors as seen
        sent.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._queue.append((data, sent))
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
            packed = b"".join(self.xadd_head + reqrep.bulk(data) for data, _ in batch)
            try:
                async with asyncio.timeout(SEND_TIMEOUT_S):
                    results = await self._write(packed, len(batch))
            except TimeoutError:
                stalled = f"no answer to XADD within {SEND_TIMEOUT_S:g} s"
                _fail(batch, RedisUnavailable(self.url, stalled))
                continue
            except IO_ERRORS as exc:
                _fail(batch, exc)
                continue
            for (_, sent), result in zip(batch, results, strict=True):
                if sent.done():
                    continue
                if isinstance(result, BaseException):
                    sent.set_exception(result)
                else:
                    sent.set_result(None)

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
    for _, sent in batch:
        if not sent.done():
            sent.set_exception(error)
