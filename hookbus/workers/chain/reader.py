"""Reading the request stream: XREADGROUP in the consumer group ``chain``, and handing each
entry to the runner.

Inline mode (one thread) reads up to :data:`READ_COUNT` entries while chains are fast,
one at a time once they are slow, and sends a batch's answers in the same write as the
next XREADGROUP, on the worker's own connection (one round trip per batch); a batch never
waits behind a slow chain (:mod:`~hookbus.workers.chain.spill`). Pool mode
(``--concurrency N``) reads only as many entries as it has free threads, and each thread
answers its own request as soon as it is done.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import redis
import redis.exceptions

from hookbus.bus import resp
from hookbus.bus.connection import CONNECTION_ERRORS
from hookbus.bus.keys import CHAIN_GROUP, Keys
from hookbus.workers.chain.raw_commands import read_replies
from hookbus.workers.chain.replier import Ack, Batch, Op, Replier
from hookbus.workers.chain.runner import ChainRunner
from hookbus.workers.chain.spill import Spiller

log = logging.getLogger(__name__)

#: Most entries one XREADGROUP takes when chains are fast (one pipelined flush per batch).
READ_COUNT = 100
#: How long one XREADGROUP blocks when the stream is empty, in ms (bounds stop latency).
READ_BLOCK_MS = 500
#: A chain slower than this (median) makes the inline loop read one entry at a time, in ms.
SLOW_CHAIN_MS = 1.0
#: How long a read beside a slow chain blocks, in ms (its end is noticed between reads).
BESIDE_BLOCK_MS = 50


def _parse_read(found: Any) -> list[tuple[bytes, dict[bytes, bytes] | None]]:
    """Entries of a raw RESP2 XREADGROUP reply on one stream (None: nothing new)."""
    if not found:
        return []
    entries: list[tuple[bytes, dict[bytes, bytes] | None]] = []
    for entry_id, flat in found[0][1]:
        if flat is None:
            entries.append((entry_id, None))
        else:
            entries.append((entry_id, dict(zip(flat[::2], flat[1::2], strict=True))))
    return entries


class ChainReader:
    """One worker's read loop step (:meth:`tick`), inline or on a thread pool."""

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        *,
        worker_id: str,
        concurrency: int,
        runner: ChainRunner,
        replier: Replier,
        stop_event: threading.Event,
    ) -> None:
        self.client = client
        self.keys = keys
        self.worker_id = worker_id
        self.concurrency = concurrency
        self.runner = runner
        self.replier = replier
        self.pool: ThreadPoolExecutor | None = None
        self.spiller = Spiller(runner, replier, stop_event)
        self._reads: dict[int, bytes] = {}  # packed XREADGROUP by COUNT
        self._conn: Any = client.connection_pool.make_connection()
        #: the watchdog's own connection, to read while a slow chain holds this loop
        self._beside: Any = client.connection_pool.make_connection()
        self._deferred: Batch | None = None  # answers sent with the next read
        self._free = threading.Semaphore(concurrency)
        self._slow = False
        self._slow_checked_at = 0.0

    def start(self) -> None:
        """Pool mode: run chains on ``concurrency`` threads; inline mode: watch for slow
        chains holding up a batch."""
        if self.concurrency > 1:
            self.pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="chain")
        else:
            self.spiller.read_more = self._read_beside
            self.spiller.start()

    def close(self) -> None:
        """Finish in-flight chains, send the answers still deferred, drop the connection."""
        if self.pool is not None:
            self.pool.shutdown(wait=True)
        self.spiller.close()
        try:
            self.flush_deferred()
        except CONNECTION_ERRORS as exc:
            log.warning("last answers not sent: Redis unavailable (%s)", exc)
        self._conn.disconnect()
        self._beside.disconnect()

    def _read_beside(self) -> list[tuple[bytes, dict[bytes, bytes] | None]]:
        """A read while a slow chain holds the loop (briefly blocking, on the watchdog's own
        connection), stamped like the loop's own reads."""
        read = resp.pack(
            "XREADGROUP", "GROUP", CHAIN_GROUP, self.worker_id, "COUNT", 10,
            "BLOCK", BESIDE_BLOCK_MS, "STREAMS", self.keys.requests, ">",
        )  # fmt: skip
        epoch = self.replier.read_epoch()
        try:
            self._beside.send_packed_command([read], check_health=False)
            (found,) = read_replies(self._beside, 1)
        except CONNECTION_ERRORS:
            self._beside.disconnect()
            raise
        if isinstance(found, redis.exceptions.ResponseError):
            raise found
        entries = _parse_read(found)
        self.replier.stamp([entry_id for entry_id, _ in entries], epoch)
        return entries

    def _read_count(self) -> int:
        if self.spiller.outstanding:
            return 1  # slow chains are running on spill threads: take only what starts now
        now = time.monotonic()
        if now >= self._slow_checked_at + 0.25:  # a median of 256 floats is not free
            self._slow_checked_at = now
            ordered = sorted(self.runner.durations)
            self._slow = bool(ordered) and ordered[len(ordered) // 2] > SLOW_CHAIN_MS
        return 1 if self._slow else READ_COUNT

    def tick(self) -> None:
        """Read once (blocking up to :data:`READ_BLOCK_MS`) and run what was read."""
        if self.pool is not None:
            self._tick_pool()
            return
        count = self._read_count()
        read = self._reads.get(count)
        if read is None:
            read = self._reads[count] = resp.pack(
                "XREADGROUP",
                "GROUP",
                CHAIN_GROUP,
                self.worker_id,
                "COUNT",
                count,
                "BLOCK",
                READ_BLOCK_MS,
                "STREAMS",
                self.keys.requests,
                ">",
            )
        # The previous batch's answers ride in the same write as the next read: one round
        # trip per batch instead of two. Redis runs them in order, so they land first.
        deferred, self._deferred = self._deferred, None
        conn = self._conn
        answers = deferred.commands if deferred else []
        epoch = self.replier.read_epoch()  # before the read: what it returns is stamped so
        conn.send_packed_command([b"".join((*answers, read))], check_health=False)
        if deferred is not None:
            # settle the answers before waiting on the read: a NOSCRIPT among them is
            # resent at once on another connection, not after the read's block
            self.replier.settle(deferred, read_replies(conn, len(answers)))
        (found,) = read_replies(conn, 1)
        if isinstance(found, redis.exceptions.ResponseError):
            raise found
        entries = _parse_read(found)
        if not entries:
            return
        self.replier.stamp([entry_id for entry_id, _ in entries], epoch)
        acks: list[Op] = [Ack(entry_id) for entry_id, fields in entries if fields is None]
        live = [(entry_id, fields) for entry_id, fields in entries if fields is not None]
        spiller = self.spiller
        spiller.begin(live, acks, slow=count == 1)
        ops: list[Op] = []
        try:
            while (entry := spiller.next()) is not None:
                due = spiller.hold(self.runner.process(*entry))
                if due:
                    self.replier.flush(due)  # a slow batch: answer what is done now
        finally:
            ops = spiller.end()
        self._deferred = self.replier.commands(ops)

    def flush_deferred(self) -> None:
        """Send the answers still waiting for the next read (on shutdown)."""
        deferred, self._deferred = self._deferred, None
        if deferred is None:
            return
        results = self.replier.execute(deferred.commands) if deferred.commands else []
        self.replier.account(results, deferred)

    def _tick_pool(self) -> None:
        """Read only as many requests as there are free threads: each starts at once, and
        what this worker cannot start now stays in the stream for another worker."""
        if not self._free.acquire(timeout=READ_BLOCK_MS / 1000):
            return
        permits = 1
        while permits < self.concurrency and self._free.acquire(blocking=False):
            permits += 1
        entries: list[tuple[bytes, dict[bytes, bytes] | None]] = []
        epoch = self.replier.read_epoch()
        try:
            found: Any = self.client.xreadgroup(
                CHAIN_GROUP,
                self.worker_id,
                {self.keys.requests: ">"},
                count=permits,
                block=READ_BLOCK_MS,
            )
            entries = found[0][1] if found else []
            self.replier.stamp([entry_id for entry_id, _ in entries], epoch)
        finally:
            for _ in range(permits - len(entries)):
                self._free.release()
        for entry_id, fields in entries:
            self.pool.submit(self._run_one, entry_id, fields)  # type: ignore[union-attr]

    def _run_one(self, entry_id: bytes, fields: dict[bytes, bytes] | None) -> None:
        """Pool mode: one entry, answered by this thread as soon as its chain is done."""
        try:
            if fields is None:  # trimmed before it was read
                self.replier.flush([Ack(entry_id)])
            else:
                self.replier.flush([self.runner.process(entry_id, fields)])
        except CONNECTION_ERRORS as exc:
            log.warning("reply to %s not sent: Redis unavailable (%s)", entry_id, exc)
        except Exception:
            log.exception("reply to %s not sent", entry_id)
        finally:
            self._free.release()
