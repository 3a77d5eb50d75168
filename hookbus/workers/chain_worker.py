"""The chain worker: answers blocking requests with the registry's priority chain.

One loop per process reads the request stream through the consumer group ``chain``
(XREADGROUP, up to :data:`READ_COUNT` entries a read), runs ``registry.run(event,
time_left_s=...)`` for each with the time its deadline leaves (by Redis server time, see
:class:`~hookbus.bus.reqrep.ServerClock`), and answers through ``reqrep.lua``: XACK, reply,
decision-log entry, in one atomic call; a batch's answers go out in the same write as
the next XREADGROUP, on the worker's own connection (one round trip per batch). A request whose
deadline has passed is dropped (acknowledged and counted): its producer already applied
its policy.

Crash recovery runs in a side thread. Every :data:`RECLAIM_INTERVAL_S` it first touches
the entries this worker holds (``XCLAIM ... JUSTID`` to itself: their idle time restarts,
their delivery count does not grow), so a live worker's entries never look abandoned however
long its chains run; then it XAUTOCLAIMs entries idle longer than :data:`RECLAIM_IDLE_MS`,
which only a dead or stalled worker leaves behind, and answers those whose deadline still
holds. An entry delivered more than ``workers.max_deliveries`` times goes to
the dead-letter stream instead of looping. Because the reply script answers only for the
delivery whose XACK wins, a request run twice (stolen from a slow worker) is answered once.

``--concurrency N`` runs chains on N threads (for I/O-bound hooks: shell, http); each thread
answers its own request as soon as it is done.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import redis
import redis.exceptions

from hookbus.bus import reqrep
from hookbus.bus.connection import CONNECTION_ERRORS, connect
from hookbus.bus.keys import CHAIN_GROUP, Keys
from hookbus.bus.timeout_policy import policy_decision
from hookbus.bus.wire import Decision, Event, encode
from hookbus.errors import WireError
from hookbus.workers.heartbeat import Heartbeat, new_worker_id

if TYPE_CHECKING:
    from hookbus.bus.settings import Settings
    from hookbus.hooks.registry import HookRegistry

log = logging.getLogger(__name__)

#: Most entries one XREADGROUP takes when chains are fast (one pipelined flush per batch).
READ_COUNT = 100
#: How long one XREADGROUP blocks when the stream is empty, in ms (bounds stop latency).
READ_BLOCK_MS = 500
#: Inline mode flushes pending replies once the oldest has waited this long, in seconds.
FLUSH_AFTER_S = 0.002
#: A chain slower than this (median) makes the inline loop read one entry at a time, in ms.
SLOW_CHAIN_MS = 1.0
#: How often the reclaim thread looks for entries abandoned by crashed workers, in s.
RECLAIM_INTERVAL_S = 0.025
#: Idle time after which a pending entry counts as abandoned, in ms. Live workers touch
#: their entries every RECLAIM_INTERVAL_S, so this only has to cover a few missed touches.
RECLAIM_IDLE_MS = 100
#: Entries one reclaim pass claims at most.
RECLAIM_COUNT = 100
#: Part of a request's time left kept back for the reply's trip to the producer: the chain
#: gets the rest, so a hook timing out still has its ``on_error`` answer arrive in time.
REPLY_MARGIN_FRACTION = 0.05
#: Bounds of that margin, in ms.
REPLY_MARGIN_MIN_MS = 3.0
REPLY_MARGIN_MAX_MS = 50.0
#: Socket timeout of the worker's own connection while a read blocks, in seconds.
RAW_READ_TIMEOUT_S = READ_BLOCK_MS / 1000 + 10.0
#: Backoff after a Redis error, in seconds (doubled up to the cap, while Redis is down).
BACKOFF_MIN_S = 0.05
BACKOFF_MAX_S = 2.0


@dataclass(frozen=True, slots=True)
class _Reply:
    entry_id: bytes
    packed: bytes  # the EVALSHA of reqrep.lua, in RESP


@dataclass(frozen=True, slots=True)
class _Batch:
    """Answer commands of a processed batch, sent together with the next read."""

    commands: list[bytes]
    reply_slots: list[int]
    entry_ids: list[bytes]


def _send_raw(conn: Any, commands: list[bytes]) -> list[Any]:
    """Write packed ``commands`` at once on ``conn`` and read every reply."""
    conn.send_packed_command([b"".join(commands)], check_health=False)
    return _read_replies(conn, len(commands))


def _read_replies(conn: Any, n: int) -> list[Any]:
    """Read ``n`` replies; error replies come back as exception objects, in place."""
    results: list[Any] = []
    for _ in range(n):
        try:
            results.append(conn.read_response(timeout=RAW_READ_TIMEOUT_S))
        except redis.exceptions.ResponseError as exc:
            results.append(exc)
    return results


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


@dataclass(frozen=True, slots=True)
class _Ack:
    entry_id: bytes


@dataclass(frozen=True, slots=True)
class _Dead:
    entry_id: bytes
    fields: dict[bytes, bytes]
    deliveries: int
    reason: str


_Op = _Reply | _Ack | _Dead


def _chain_budget_s(left_ms: float | None) -> float | None:
    """The chain's share of the time left: all of it but the reply margin."""
    if left_ms is None:
        return None
    margin = min(max(left_ms * REPLY_MARGIN_FRACTION, REPLY_MARGIN_MIN_MS), REPLY_MARGIN_MAX_MS)
    return max(left_ms - margin, left_ms / 2) / 1000


class ChainWorker:
    """One chain worker process's loop. Build it, call :meth:`run`, set ``stop_event``."""

    def __init__(
        self,
        settings: Settings,
        registry: HookRegistry,
        *,
        client: redis.Redis | None = None,
        concurrency: int = 1,
        worker_id: str | None = None,
        stop_event: threading.Event | None = None,
        info: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        self.settings = settings
        self.registry = registry
        self.client = client if client is not None else connect(settings.effective_redis_url)
        self.keys = Keys.for_namespace(settings.namespace)
        self.concurrency = concurrency
        self.worker_id = worker_id or new_worker_id("chain")
        self.stop_event = stop_event or threading.Event()
        self.clock = reqrep.ServerClock()
        self.heartbeat = Heartbeat(
            self.client,
            self.keys,
            role="chain",
            interval_ms=settings.workers.heartbeat_interval_ms,
            info=info or self._default_info,
            worker_id=self.worker_id,
            concurrency=concurrency,
        )
        self._script_source = reqrep.reply_script_source()
        self._script_sha = hashlib.sha1(self._script_source.encode()).hexdigest()
        # the constant parts of every answer's EVALSHA, packed once (see reqrep.lua)
        self._script_head = b"*21\r\n" + b"".join(
            reqrep.bulk(a)
            for a in ("EVALSHA", self._script_sha, 3, self.keys.requests, self.keys.decisions)
        )
        self._script_consts = b"".join(
            reqrep.bulk(a)
            for a in (
                CHAIN_GROUP,
                settings.streams.reply_ttl_s * 1000,
                reqrep.INBOX_MAXLEN,
                settings.streams.decisions_maxlen,
            )
        )
        self._worker_bulk = reqrep.bulk(self.worker_id)
        self._reads: dict[int, bytes] = {}  # packed XREADGROUP by COUNT
        self._reconnected = True  # False after a connection error: reload the script
        self._reclaim_cursor: bytes | str = "0-0"
        self._mine: set[bytes] = set()
        self._mine_lock = threading.Lock()
        self._durations: deque[float] = deque(maxlen=256)
        self._conn: Any = self.client.connection_pool.make_connection()
        self._deferred: _Batch | None = None
        self._free = threading.Semaphore(concurrency)
        self._slow = False
        self._slow_checked_at = 0.0
        self._pool: ThreadPoolExecutor | None = None
        self._reclaimer: threading.Thread | None = None
        self.answered = 0
        self.expired = 0
        self.dead_lettered = 0
        self.duplicates = 0

    def _default_info(self) -> dict[str, Any]:
        version = getattr(self.registry, "version", None)
        try:
            hooks = len(self.registry.hooks())
        except Exception:  # info for a heartbeat must never fail
            hooks = 0
        return {"version": version, "hooks": hooks, "problems": []}

    # --- lifecycle ----------------------------------------------------------------------

    def run(self) -> None:
        """Serve until ``stop_event`` is set; then finish in-flight chains and leave.

        Redis trouble never ends the loop: connection errors and refused commands are
        logged and retried with backoff, and a server that came back empty gets its
        consumer group and reply script again.
        """
        if not self._wait_for_redis():
            return
        self.heartbeat.start()
        if self.concurrency > 1:
            self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="chain")
        self._reclaimer = threading.Thread(
            target=self._reclaim_loop, name=f"reclaim-{self.worker_id}", daemon=True
        )
        self._reclaimer.start()
        log.info("chain worker %s serving %s", self.worker_id, self.keys.requests)
        backoff = BACKOFF_MIN_S
        try:
            while not self.stop_event.is_set():
                try:
                    self._tick()
                    backoff = BACKOFF_MIN_S
                except CONNECTION_ERRORS as exc:
                    log.warning("Redis unavailable (%s); retrying in %.2f s", exc, backoff)
                    self._reconnected = False
                except redis.exceptions.ResponseError as exc:
                    if "NOGROUP" in str(exc):
                        log.warning("consumer group missing (Redis restarted?); recreating it")
                        self._reconnected = False
                        continue
                    log.error("Redis refused a command (%s); retrying in %.2f s", exc, backoff)
                except Exception:
                    log.exception("chain worker loop failed; retrying in %.2f s", backoff)
                else:
                    continue
                self.stop_event.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)
        finally:
            self._shutdown()

    def _shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        try:
            self.flush_deferred()
        except CONNECTION_ERRORS as exc:
            log.warning("last answers not sent: Redis unavailable (%s)", exc)
        self._conn.disconnect()
        if self._reclaimer is not None:
            self._reclaimer.join(timeout=2.0)
        self.heartbeat.stop()
        log.info(
            "chain worker %s stopped: %d answered, %d expired, %d dead-lettered",
            self.worker_id,
            self.answered,
            self.expired,
            self.dead_lettered,
        )

    def _wait_for_redis(self) -> bool:
        """Create the group, load the script, sync the clock, retrying with backoff while
        Redis is down. False when asked to stop before Redis answered."""
        backoff = BACKOFF_MIN_S
        while not self.stop_event.is_set():
            try:
                self._prepare_server()
                self.clock.refresh(self.client)
                return True
            except CONNECTION_ERRORS as exc:
                log.warning("Redis unavailable (%s); retrying in %.2f s", exc, backoff)
            except redis.exceptions.ResponseError as exc:
                log.error("Redis refused a command (%s); retrying in %.2f s", exc, backoff)
            self.stop_event.wait(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX_S)
        return False

    def _prepare_server(self) -> None:
        """What a (possibly restarted, empty) server needs before answers can flow."""
        self._ensure_group()
        self.client.script_load(self._script_source)
        self._reconnected = True

    def _ensure_group(self) -> None:
        """XGROUP CREATE ... 0 MKSTREAM; an existing group (BUSYGROUP) is fine."""
        try:
            self.client.xgroup_create(self.keys.requests, CHAIN_GROUP, id="0", mkstream=True)
        except redis.exceptions.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    # --- the read loop ------------------------------------------------------------------

    def _read_count(self) -> int:
        if self.concurrency > 1:
            return self.concurrency
        now = time.monotonic()
        if now >= self._slow_checked_at + 0.25:  # a median of 256 floats is not free
            self._slow_checked_at = now
            ordered = sorted(self._durations)
            self._slow = bool(ordered) and ordered[len(ordered) // 2] > SLOW_CHAIN_MS
        return 1 if self._slow else READ_COUNT

    def _tick(self) -> None:
        if not self._reconnected:
            # Redis may have restarted empty: group and reply script must be there before
            # answers ride with a blocking read (a NOSCRIPT would otherwise cost a resend)
            self._prepare_server()
        self.clock.maybe_refresh(self.client)
        if self._pool is not None:
            self._tick_pool()
            return
        count = self._read_count()
        read = self._reads.get(count)
        if read is None:
            read = self._reads[count] = reqrep.pack_command(
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
        try:
            answers = deferred.commands if deferred else []
            conn.send_packed_command([b"".join((*answers, read))], check_health=False)
            if deferred is not None:
                # settle the answers before waiting on the read: a NOSCRIPT among them is
                # resent at once on another connection, not after the read's block
                self._settle(deferred, _read_replies(conn, len(answers)))
        finally:
            if deferred is not None:
                self._release(deferred.entry_ids)
        (found,) = _read_replies(conn, 1)
        if isinstance(found, redis.exceptions.ResponseError):
            raise found
        entries = _parse_read(found)
        if not entries:
            return
        ids = [entry_id for entry_id, _ in entries]
        with self._mine_lock:
            self._mine.update(ids)
        ops: list[_Op] = []
        oldest = 0.0
        try:
            for entry_id, fields in entries:
                if fields is None:  # trimmed before we read it
                    ops.append(_Ack(entry_id))
                    continue
                op = self._process(entry_id, fields)
                if not ops:
                    oldest = time.monotonic()
                ops.append(op)
                if time.monotonic() - oldest >= FLUSH_AFTER_S:
                    self._flush(ops)  # a slow batch: answer what is done now
                    ops = []
        except BaseException:
            self._release(ids)
            raise
        commands, slots = self._commands(ops)
        self._deferred = _Batch(commands, slots, ids)

    def _release(self, ids: list[bytes]) -> None:
        with self._mine_lock:
            self._mine.difference_update(ids)

    def _settle(self, batch: _Batch, results: list[Any]) -> None:
        """Count a sent batch's answers; resend it when Redis had lost the reply script."""
        if any(isinstance(r, redis.exceptions.NoScriptError) for r in results):
            results = self._execute(batch.commands)
        for result in results:
            if isinstance(result, redis.exceptions.ResponseError):
                log.error("Redis refused an answer command: %s", result)
        self._account(results, batch.reply_slots)

    def flush_deferred(self) -> None:
        """Send the answers still waiting for the next read (on shutdown)."""
        deferred, self._deferred = self._deferred, None
        if deferred is None:
            return
        try:
            self._account(self._execute(deferred.commands), deferred.reply_slots)
        finally:
            self._release(deferred.entry_ids)

    def _tick_pool(self) -> None:
        # wait for a free thread before taking work other workers could take instead
        if not self._free.acquire(timeout=READ_BLOCK_MS / 1000):
            return
        self._free.release()
        found: Any = self.client.xreadgroup(
            CHAIN_GROUP,
            self.worker_id,
            {self.keys.requests: ">"},
            count=self._read_count(),
            block=READ_BLOCK_MS,
        )
        if not found:
            return
        entries: list[tuple[bytes, dict[bytes, bytes]]] = found[0][1]
        with self._mine_lock:
            self._mine.update(entry_id for entry_id, _ in entries)
        for entry_id, fields in entries:
            self._free.acquire()
            self._pool.submit(self._run_one, entry_id, fields)  # type: ignore[union-attr]

    def _run_one(self, entry_id: bytes, fields: dict[bytes, bytes]) -> None:
        """Pool mode: one entry, answered by this thread as soon as its chain is done."""
        try:
            self._flush([self._process(entry_id, fields)])
        except CONNECTION_ERRORS as exc:
            log.warning("reply to %s not sent: Redis unavailable (%s)", entry_id, exc)
        except Exception:
            log.exception("reply to %s not sent", entry_id)
        finally:
            with self._mine_lock:
                self._mine.discard(entry_id)
            self._free.release()

    # --- one request --------------------------------------------------------------------

    def _process(self, entry_id: bytes, fields: dict[bytes, bytes], deliveries: int = 1) -> _Op:
        try:
            event = reqrep.decode_request(fields)
        except WireError as exc:
            log.error("request %s is not a valid event (%s); dead-lettered", entry_id, exc)
            return _Dead(entry_id, fields, deliveries, f"undecodable: {exc}")
        left_ms = self.clock.time_left_ms(event)
        if left_ms is not None and left_ms <= 0:
            self.expired += 1
            self.heartbeat.count("expired")
            log.debug("request %s expired %.1f ms ago; dropped", event.id, -left_ms)
            return _Ack(entry_id)
        started = time.perf_counter()
        error = False
        try:
            decision = self.registry.run(event, time_left_s=_chain_budget_s(left_ms))
        except Exception as exc:  # the registry isolates hooks; this is a bug, not a hook
            log.exception("chain for request %s failed", event.id)
            error = True
            decision = self._chain_failed(event, exc)
        duration_ms = (time.perf_counter() - started) * 1000
        self._durations.append(duration_ms)
        error = error or any(run.outcome in ("error", "timeout") for run in decision.trace)
        self.heartbeat.record(duration_ms, error)
        decision.worker = self.worker_id
        decision.request_id = event.id
        try:
            return self._reply_op(entry_id, event, decision, duration_ms)
        except Exception as exc:  # e.g. a hook put something unencodable in `updated`
            log.exception("decision for request %s cannot be encoded", event.id)
            failed = self._chain_failed(event, exc)
            failed.worker = self.worker_id
            return self._reply_op(entry_id, event, failed, duration_ms)

    def _chain_failed(self, event: Event, exc: Exception) -> Decision:
        policy = self.settings.on_timeout_for(event.kind)
        deadline_ms = (event.deadline - event.ts) if event.deadline else 0
        return policy_decision(
            "chain_error",
            policy,
            deadline_ms=deadline_ms,
            request_id=event.id,
            detail=f"{type(exc).__name__}: {exc}",
        )

    def _reply_op(
        self, entry_id: bytes, event: Event, decision: Decision, duration_ms: float
    ) -> _Reply:
        mode = reqrep.reply_mode(self.keys, event.reply_to)
        if mode == "n" and event.reply_to:
            log.warning(
                "request %s names reply key %r outside namespace %s; not answered",
                event.id,
                event.reply_to,
                self.keys.ns,
            )
        bulk = reqrep.bulk
        packed = b"".join(
            (
                self._script_head,
                bulk(event.reply_to if mode != "n" and event.reply_to else self.keys.requests),
                self._script_consts,
                bulk(entry_id),
                bulk(mode),
                bulk(encode(decision)),
                bulk(event.id),
                bulk(event.kind),
                bulk(decision.outcome),
                self._worker_bulk,
                b"$1\r\n1\r\n" if decision.degraded else b"$1\r\n0\r\n",
                bulk(int(duration_ms * 1000)),
                bulk(event.session_id or ""),
                bulk(event.agent_id or ""),
            )
        )
        return _Reply(entry_id=entry_id, packed=packed)

    def _flush(self, ops: list[_Op]) -> None:
        """Answer / ack / dead-letter a batch now, in one pipelined round trip."""
        commands, slots = self._commands(ops)
        self._account(self._execute(commands), slots)

    def _commands(self, ops: list[_Op]) -> tuple[list[bytes], list[int]]:
        """The packed commands answering ``ops`` and the positions of the reply scripts."""
        commands: list[bytes] = []
        reply_slots: list[int] = []
        for op in ops:
            if isinstance(op, _Reply):
                reply_slots.append(len(commands))
                commands.append(op.packed)
            elif isinstance(op, _Ack):
                commands.append(
                    reqrep.pack_command("XACK", self.keys.requests, CHAIN_GROUP, op.entry_id)
                )
            else:
                commands.extend(self._dead_letter(op))
        return commands, reply_slots

    def _account(self, results: list[Any], reply_slots: list[int]) -> None:
        answered = sum(1 for slot in reply_slots if results[slot] == 1)
        self.answered += answered
        duplicates = len(reply_slots) - answered
        if duplicates:
            self.duplicates += duplicates
            self.heartbeat.count("duplicates", duplicates)  # answered by another delivery

    def _execute(self, commands: list[bytes]) -> list[Any]:
        """Send a batch in one write on a pooled connection; load the reply script and
        resend when Redis lost it.

        EVALSHA is sent directly rather than through redis-py's Script in a pipeline, which
        costs a SCRIPT EXISTS round trip per batch. NOSCRIPT (after a Redis restart or
        SCRIPT FLUSH) means that script did not run, and every other command of the batch
        is idempotent (XACK) or guarded by XACK, so the batch is safe to send again.
        """
        pool = self.client.connection_pool
        for attempt in range(2):
            conn = pool.get_connection()
            try:
                results = _send_raw(conn, commands)
            finally:
                pool.release(conn)
            missing = any(isinstance(r, redis.exceptions.NoScriptError) for r in results)
            if not missing:
                break
            if attempt == 0:
                self.client.script_load(self._script_source)
        for result in results:
            if isinstance(result, redis.exceptions.ResponseError):
                raise result
        return results

    def _dead_letter(self, op: _Dead) -> list[bytes]:
        fields: list[Any] = [
            "stream",
            self.keys.requests,
            "entry_id",
            op.entry_id,
            "group",
            CHAIN_GROUP,
            "deliveries",
            op.deliveries,
            "reason",
            op.reason,
            "worker",
            self.worker_id,
        ]
        if reqrep.REQUEST_FIELD in op.fields:
            fields += ["e", op.fields[reqrep.REQUEST_FIELD]]
        self.dead_lettered += 1
        self.heartbeat.count("dead_lettered")
        return [
            reqrep.pack_command(
                "XADD",
                self.keys.dead_letters,
                "MAXLEN",
                "~",
                self.settings.streams.requests_maxlen,
                "*",
                *fields,
            ),
            reqrep.pack_command("XACK", self.keys.requests, CHAIN_GROUP, op.entry_id),
        ]

    # --- crash recovery -----------------------------------------------------------------

    def reclaim_idle_ms(self) -> int:
        """Entries idle longer than this are abandoned (their worker stopped touching them)."""
        return RECLAIM_IDLE_MS

    def touch_mine(self) -> int:
        """Restart the idle time of every entry this worker holds, without counting a
        delivery (XCLAIM JUSTID to itself), so no other worker takes them for abandoned."""
        with self._mine_lock:
            ids: list[Any] = list(self._mine)
        if ids:
            self.client.xclaim(self.keys.requests, CHAIN_GROUP, self.worker_id, 0, ids, justid=True)
        return len(ids)

    def _reclaim_loop(self) -> None:
        backoff = RECLAIM_INTERVAL_S
        while not self.stop_event.wait(backoff):
            try:
                self.touch_mine()
                self.reclaim()
                backoff = RECLAIM_INTERVAL_S
            except CONNECTION_ERRORS as exc:
                log.debug("reclaim: Redis unavailable (%s)", exc)
                backoff = min(max(backoff * 2, BACKOFF_MIN_S), BACKOFF_MAX_S)
            except redis.exceptions.ResponseError as exc:
                log.debug("reclaim: %s", exc)
                backoff = min(max(backoff * 2, BACKOFF_MIN_S), BACKOFF_MAX_S)
            except Exception:
                log.exception("reclaim pass failed")
                backoff = BACKOFF_MAX_S

    def reclaim(self) -> int:
        """One pass: claim abandoned entries, answer or dead-letter them. Returns how many
        entries were claimed from other consumers."""
        idle_ms = self.reclaim_idle_ms()
        result: Any = self.client.xautoclaim(
            self.keys.requests,
            CHAIN_GROUP,
            self.worker_id,
            min_idle_time=idle_ms,
            start_id=self._reclaim_cursor,
            count=RECLAIM_COUNT,
        )
        # a long pending list is scanned RECLAIM_COUNT entries per pass, resuming where
        # the last pass stopped (XAUTOCLAIM's cursor; 0-0 once the end is reached)
        self._reclaim_cursor = result[0] if result else b"0-0"
        claimed: list[tuple[bytes, dict[bytes, bytes] | None]] = result[1] if result else []
        deleted: list[bytes] = result[2] if result and len(result) > 2 else []
        with self._mine_lock:
            foreign = [(i, f) for i, f in claimed if i not in self._mine]
            self._mine.update(i for i, _ in foreign)
        try:
            return self._answer_claimed(foreign, deleted)
        finally:
            with self._mine_lock:
                self._mine.difference_update(i for i, _ in foreign)

    def _answer_claimed(
        self,
        claimed: list[tuple[bytes, dict[bytes, bytes] | None]],
        deleted: list[bytes],
    ) -> int:
        ops: list[_Op] = [_Ack(entry_id) for entry_id in deleted]
        live = [(i, f) for i, f in claimed if f is not None]
        ops.extend(_Ack(i) for i, f in claimed if f is None)
        if live:
            pipe = self.client.pipeline(transaction=False)
            for entry_id, _ in live:
                pipe.xpending_range(
                    self.keys.requests, CHAIN_GROUP, min=entry_id, max=entry_id, count=1
                )
            counts = pipe.execute()
            limit = self.settings.workers.max_deliveries
            for (entry_id, fields), pending in zip(live, counts, strict=True):
                assert fields is not None
                deliveries = int(pending[0]["times_delivered"]) if pending else 1
                if deliveries > limit:
                    log.error(
                        "request entry %s delivered %d times (limit %d); dead-lettered",
                        entry_id,
                        deliveries,
                        limit,
                    )
                    ops.append(_Dead(entry_id, fields, deliveries, "too many deliveries"))
                    continue
                log.info("reclaimed request entry %s (delivery %d)", entry_id, deliveries)
                self.heartbeat.count("reclaimed")
                ops.append(self._process(entry_id, fields, deliveries))
        if ops:
            self._flush(ops)
        return len(live)


def run_chain_worker(
    settings: Settings,
    *,
    concurrency: int = 1,
    hooks_dir: Path | None = None,
    registry: HookRegistry | None = None,
    stop_event: threading.Event | None = None,
) -> None:
    """Run a chain worker until ``stop_event`` is set (the CLI sets it on SIGTERM/SIGINT).

    Hooks: a given ``registry`` without ``hooks_dir`` is used as it is (static hooks, for
    tests and embedding); otherwise a :class:`~hookbus.workers.hookset.HookHost` loads the
    current bundle (or ``hooks_dir``) into it and follows reloads.
    """
    client = connect(settings.effective_redis_url)
    host: Any = None
    info: Callable[[], dict[str, Any]] | None = None
    if registry is None or hooks_dir is not None:
        from hookbus.workers.hookset import HookHost

        if registry is None:
            from hookbus.hooks.registry import HookRegistry

            registry = HookRegistry.from_settings(settings)
        host = HookHost(registry, settings, hooks_dir=hooks_dir)
        host.start(client)
        info = host.info
    worker = ChainWorker(
        settings,
        registry,
        client=client,
        concurrency=concurrency,
        stop_event=stop_event,
        info=info,
    )
    if host is not None:
        host.add_listener(worker.heartbeat.beat_now)
    try:
        worker.run()
    finally:
        if host is not None:
            host.stop()
