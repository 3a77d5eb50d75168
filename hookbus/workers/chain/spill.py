"""Head-of-line protection for the inline read loop: a batch never waits behind a slow chain.

The inline loop reads up to 100 requests at once and runs them one after another, which is
what makes it fast (one round trip per batch). When one chain of a batch is slow, the rest
of the batch must not wait for it, neither the requests behind it nor the answers of those
run before it: a watchdog thread notices that no chain of the batch has started for
:data:`SPILL_AFTER_S`, starts every request still waiting on spill threads (each answered as
soon as its chain is done) and sends the answers held for the batch's write at once. A batch
of fast chains finishes before the watchdog first looks, so it costs nothing but one event
set per batch.

Nor does a request that arrives while the slow chain still holds the read loop: the
watchdog then reads in its place (``read_more``, a connection of its own) until that chain
returns, and starts what it reads on spill threads too. And no agent takes every spill
thread: at most :data:`PER_AGENT_SPILLS` of one agent's requests run at once, the rest of
its requests wait their turn in a queue of its own, so another agent's requests find a
thread while one agent's slow hook holds many.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import msgspec

from hookbus.bus.connection import CONNECTION_ERRORS
from hookbus.bus.reqrep import REQUEST_FIELD
from hookbus.workers.chain.replier import Ack

if TYPE_CHECKING:
    from hookbus.workers.chain.replier import Op, Replier
    from hookbus.workers.chain.runner import ChainRunner


class _Agent(msgspec.Struct):
    """The one field of a request's event the spill threads' fairness needs."""

    agent_id: str | None = None


_AGENT = msgspec.msgpack.Decoder(_Agent)


log = logging.getLogger(__name__)

#: A batch whose running chain has not finished within this long has the rest of its
#: requests started on spill threads, in seconds.
SPILL_AFTER_S = 0.005
#: Threads that run spilled requests (each answers its own).
SPILL_THREADS = 32
#: Answers held for the batch's write are sent once the oldest has waited this long, in s.
FLUSH_AFTER_S = 0.002
#: How often the watchdog looks at a batch it was not woken for (a single request), in s:
#: the longest a slow single chain holds the read loop before others are read beside it.
LOOK_EVERY_S = 0.05
#: Most spill threads one agent's requests hold at once (the others wait for one of them).
PER_AGENT_SPILLS = SPILL_THREADS // 2

Entry = tuple[bytes, dict[bytes, bytes]]
#: Reads more requests while a slow chain holds the read loop (the worker's read, on a
#: connection of its own, blocking briefly): ``(entry id, fields or None)`` pairs.
ReadMore = Callable[[], list[tuple[bytes, dict[bytes, bytes] | None]]]


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
        self._began = 0.0  # when the current batch began (monotonic s)
        #: answers of the batch not sent yet, and when the oldest was held (monotonic s)
        self._held: list[Op] = []
        self._held_since = 0.0
        self._held_lock = threading.Lock()
        self._wake = threading.Event()
        self._pool: ThreadPoolExecutor | None = None
        self._thread: threading.Thread | None = None
        #: reads on while a slow chain holds the read loop (set by the reader; None: never)
        self.read_more: ReadMore | None = None
        #: spilled requests running, and those waiting their turn, per agent
        self._running: dict[str, int] = {}
        self._queued: dict[str, deque[Entry]] = {}

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

    def begin(self, entries: list[Entry], held: list[Op], *, slow: bool = False) -> None:
        """Start a batch: ``entries`` to run, ``held`` answers already due (acks). The
        watchdog looks at a batch of several, and at a single one while chains are slow
        (``slow``): then one may hold the loop while others arrive."""
        with self._held_lock:
            self._held, self._held_since = list(held), time.monotonic()
        self._waiting = deque(entries)
        self._started = 0
        self._began = time.monotonic()
        if self._pool is not None and (len(entries) > 1 or slow):
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
            if not self._wake.wait(LOOK_EVERY_S):
                # a batch nobody woke us for (a single request) that runs this long holds
                # the loop: read in its place until it is done
                waiting = self._waiting
                if waiting is not None and time.monotonic() - self._began >= LOOK_EVERY_S:
                    self._send_held()
                    self._spill(waiting)
                    self._read_in_its_place()
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
                # behind it starts elsewhere, and what ran before it is answered now;
                # what arrives while it runs is read here and started elsewhere too.
                self._send_held()
                self._spill(waiting)
                self._read_in_its_place()
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
        if taken:
            log.info(
                "a slow chain holds up %d read request(s): started on spill threads", len(taken)
            )
            self._start(taken)

    def _read_in_its_place(self) -> None:
        """While the slow chain holds the read loop, read what arrives and start it here
        (until that batch ends: the next one is a new ``_waiting``)."""
        read_more, batch = self.read_more, self._waiting
        while read_more is not None and batch is not None and self._waiting is batch:
            if self.stop_event.is_set():
                break
            try:
                found = read_more()
            except CONNECTION_ERRORS as exc:
                log.warning("reading beside a slow chain: Redis unavailable (%s)", exc)
                self.stop_event.wait(0.05)
                continue
            acks: list[Op] = [Ack(entry_id) for entry_id, fields in found if fields is None]
            if acks and self._pool is not None:
                self._pool.submit(self._flush, acks)
            self._start([(entry_id, fields) for entry_id, fields in found if fields is not None])

    def _start(self, taken: list[Entry]) -> None:
        """Run ``taken`` on spill threads, each agent's at most :data:`PER_AGENT_SPILLS` at
        once (the rest wait in the agent's queue)."""
        if not taken or self._pool is None:
            return
        self.runner.heartbeat.count("spilled", len(taken))  # shown by `status --json`
        for entry in taken:
            agent = _agent_of(entry[1])
            with self._count_lock:
                self.outstanding += 1
                if self._running.get(agent, 0) >= PER_AGENT_SPILLS:
                    self._queued.setdefault(agent, deque()).append(entry)
                    continue
                self._running[agent] = self._running.get(agent, 0) + 1
            self._pool.submit(self._run, agent, *entry)

    def _run(self, agent: str, entry_id: bytes, fields: dict[bytes, bytes]) -> None:
        try:
            self.replier.flush([self.runner.process(entry_id, fields)])
        except CONNECTION_ERRORS as exc:
            log.warning("reply to %s not sent: Redis unavailable (%s)", entry_id, exc)
        except Exception:
            log.exception("reply to %s not sent", entry_id)
        finally:
            self._finished(agent)

    def _finished(self, agent: str) -> None:
        """One of ``agent``'s spilled requests is done: start its next waiting one."""
        with self._count_lock:
            self.outstanding -= 1
            queued = self._queued.get(agent)
            if queued:
                entry = queued.popleft()
                if not queued:
                    del self._queued[agent]
            else:
                entry = None
                left = self._running.get(agent, 1) - 1
                if left > 0:
                    self._running[agent] = left
                else:
                    self._running.pop(agent, None)
        if entry is not None and self._pool is not None:
            self._pool.submit(self._run, agent, *entry)


def _agent_of(fields: dict[bytes, bytes]) -> str:
    """The agent a request entry comes from ("" when none, or it cannot be read: the
    runner answers such an entry as usual)."""
    try:
        return _AGENT.decode(fields.get(REQUEST_FIELD, b"")).agent_id or ""
    except (msgspec.DecodeError, TypeError):
        return ""
