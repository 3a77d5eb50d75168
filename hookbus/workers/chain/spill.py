"""Head-of-line protection for the inline read loop: a batch never waits behind a slow chain.

The inline loop reads up to 100 requests at once and runs them one after another, which is
what makes it fast (one round trip per batch). When one chain of a batch is slow, the rest
of the batch must not wait for it, neither the requests behind it nor the answers of those
run before it: a watchdog thread notices that no chain of the batch has started for
:data:`SPILL_AFTER_S`, starts every request still waiting on spill threads (each answered as
soon as its chain is done) and sends the answers held for the batch's write at once. A batch
of fast chains finishes before the watchdog first looks, so it costs nothing but one event
set per batch.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from hookbus.bus.connection import CONNECTION_ERRORS

if TYPE_CHECKING:
    from hookbus.workers.chain.replier import Op, Replier
    from hookbus.workers.chain.runner import ChainRunner

log = logging.getLogger(__name__)

#: A batch whose running chain has not finished within this long has the rest of its
#: requests started on spill threads, in seconds.
SPILL_AFTER_S = 0.005
#: Threads that run spilled requests (each answers its own).
SPILL_THREADS = 32
#: Answers held for the batch's write are sent once the oldest has waited this long, in s.
FLUSH_AFTER_S = 0.002

Entry = tuple[bytes, dict[bytes, bytes]]


class Spiller:
    """Hands a batch's waiting requests to spill threads when the chain in front is slow.

    The read loop calls :meth:`begin` with a batch, :meth:`next` before each chain,
    :meth:`hold` with each answer and :meth:`end` after the batch; the watchdog takes what
    :meth:`next` has not yet taken, and the answers held, when a chain is slow.
    """

    def __init__(self, runner: ChainRunner, replier: Replier, stop_event: threading.Event) -> None:
        self.runner = runner
        self.replier = replier
        self.stop_event = stop_event
        #: spilled chains not finished yet; while any is, the read loop reads one at a time
        self.outstanding = 0
        self._count_lock = threading.Lock()
        self._waiting: deque[Entry] | None = None
        self._started = 0  # chains started in the current batch (written by the reader only)
        #: answers of the batch not sent yet, and when the oldest was held (monotonic s)
        self._held: list[Op] = []
        self._held_since = 0.0
        self._held_lock = threading.Lock()
        self._wake = threading.Event()
        self._pool: ThreadPoolExecutor | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._pool = ThreadPoolExecutor(SPILL_THREADS, thread_name_prefix="chain-spill")
        self._thread = threading.Thread(target=self._watch, name="chain-spill-watch", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop watching and wait for the spilled chains to answer."""
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    def begin(self, entries: list[Entry], held: list[Op]) -> None:
        """Start a batch: ``entries`` to run, ``held`` answers already due (acks)."""
        with self._held_lock:
            self._held, self._held_since = list(held), time.monotonic()
        self._waiting = deque(entries)
        self._started = 0
        if self._pool is not None and len(entries) > 1:
            self._wake.set()

    def hold(self, op: Op) -> list[Op]:
        """Keep an answer for the batch's write; returns the answers to send now instead
        (all those held, once the oldest has waited :data:`FLUSH_AFTER_S`)."""
        now = time.monotonic()
        with self._held_lock:
            if not self._held:
                self._held_since = now
            self._held.append(op)
            if now - self._held_since < FLUSH_AFTER_S:
                return []
            due, self._held = self._held, []
        return due

    def next(self) -> Entry | None:
        """The next request of the batch for the read loop, None when none is left."""
        waiting = self._waiting
        try:
            entry = waiting.popleft() if waiting is not None else None
        except IndexError:  # the watchdog took the rest
            return None
        self._started += 1
        return entry

    def end(self) -> list[Op]:
        """End the batch; returns the answers still held (sent with the next read)."""
        self._waiting = None
        with self._held_lock:
            held, self._held = self._held, []
        return held

    def _watch(self) -> None:
        while not self.stop_event.is_set():
            if not self._wake.wait(0.5):
                continue
            self._wake.clear()
            seen = -1
            while not self.stop_event.wait(SPILL_AFTER_S):
                waiting = self._waiting
                if waiting is None:
                    break  # the batch is done
                if self._started != seen:
                    seen = self._started
                    continue
                # no chain started for a whole interval: a slow one runs. What waits
                # behind it starts elsewhere, and what ran before it is answered now.
                self._send_held()
                self._spill(waiting)
                break

    def _send_held(self) -> None:
        with self._held_lock:
            held, self._held = self._held, []
        if held and self._pool is not None:
            self._pool.submit(self._flush, held)

    def _flush(self, ops: list[Op]) -> None:
        try:
            self.replier.flush(ops)
        except CONNECTION_ERRORS as exc:
            log.warning("%d answer(s) not sent: Redis unavailable (%s)", len(ops), exc)
        except Exception:
            log.exception("%d answer(s) not sent", len(ops))

    def _spill(self, waiting: deque[Entry]) -> None:
        taken: list[Entry] = []
        while True:
            try:
                taken.append(waiting.popleft())
            except IndexError:
                break
        if not taken or self._pool is None:
            return
        self.runner.heartbeat.count("spilled", len(taken))  # shown by `status --json`
        with self._count_lock:
            self.outstanding += len(taken)
        log.info("a slow chain holds up %d read request(s): started on spill threads", len(taken))
        for entry_id, fields in taken:
            self._pool.submit(self._run, entry_id, fields)

    def _run(self, entry_id: bytes, fields: dict[bytes, bytes]) -> None:
        try:
            self.replier.flush([self.runner.process(entry_id, fields)])
        except CONNECTION_ERRORS as exc:
            log.warning("reply to %s not sent: Redis unavailable (%s)", entry_id, exc)
        except Exception:
            log.exception("reply to %s not sent", entry_id)
        finally:
            with self._count_lock:
                self.outstanding -= 1
