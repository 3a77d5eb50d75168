"""Answering blocking requests: replies, acks and dead letters, packed by hand.

Two paths. While this worker's ownership lease holds for the epoch an entry was read in
(:meth:`~hookbus.workers.chain.lease.OwnerLease.holds`), no other worker can have taken the entry
over, so its answer is one bare XADD to the producer's inbox, and its XACK and
decision-log record go to the :class:`~hookbus.workers.chain.ledger.AckLedger`, settled in
bulk: a request costs its worker two commands (XREADGROUP, XADD) instead of five. Otherwise
(the lease lapsed or is stale, a reply list of the lean adapters, an entry to be answered
and then dead-lettered) the answer goes through ``reqrep.lua``: XACK, reply and
decision-log entry in one atomic call, only for the delivery whose XACK wins, so a request
run twice is answered once. Commands are packed in RESP by hand and sent on raw
connections: several times cheaper than redis-py's pipeline on this hot path, and a
batch's answers can ride in the same write as the next read.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import redis
import redis.exceptions

from hookbus.approvals import scripts
from hookbus.approvals.model import summarise_input
from hookbus.bus import reqrep, resp
from hookbus.bus.decision_batch import DecisionRecord, encode_record
from hookbus.bus.keys import CHAIN_GROUP, Keys
from hookbus.bus.wire import Decision, Event, encode
from hookbus.workers.chain.ledger import AckLedger, Item, Record
from hookbus.workers.chain.raw_commands import EXEC, MULTI, send_pooled
from hookbus.workers.unguarded.marks import GUARD_KINDS, guarded_names

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings
    from hookbus.workers.chain.lease import OwnerLease
    from hookbus.workers.fleet.heartbeat import Heartbeat

log = logging.getLogger(__name__)

#: Constant parts of the hand-packed answers.
_ZERO = resp.bulk(0)
_ONE = resp.bulk(1)
_EVALSHA = resp.bulk("EVALSHA")
_INBOX_XADD = resp.prefix(11, "XADD")
_DECISION_FIELD = resp.bulk(reqrep.INBOX_DECISION_FIELD)


@dataclass(frozen=True, slots=True)
class Reply:
    """Answer a request: where the reply goes, the decision and what the log records.

    ``guarded`` forces the XACK-guarded script (an answer followed by a dead letter of the
    same entry must be the one whose XACK wins)."""

    entry_id: bytes
    key: bytes  # the reply key, as a RESP bulk string
    mode: str
    decision: bytes
    request_id: str
    kind: str
    outcome: str
    degraded: bool
    duration_us: int
    session: str
    agent: str
    logged: bool
    guarded: bool = False
    tool: str = ""
    asked: str = ""  # the tool's input summed up (the decision log's ``input``)

    def script_args(self, log_bulk: bytes, worker_bulk: bytes) -> bytes:
        """This request's 14 arguments of reqrep.lua, packed."""
        bulk = resp.bulk
        return b"".join(
            (
                log_bulk if self.logged else _ZERO,
                bulk(self.entry_id),
                bulk(self.mode),
                bulk(self.decision),
                bulk(self.request_id),
                bulk(self.kind),
                bulk(self.outcome),
                worker_bulk,
                _ONE if self.degraded else _ZERO,
                bulk(self.duration_us),
                bulk(self.session),
                bulk(self.agent),
                bulk(self.tool),
                bulk(self.asked),
            )
        )

    def record(self, worker_id: bytes) -> Record:
        """This answer's decision-log record (the fields reqrep.lua would log), encoded."""
        return encode_record(
            DecisionRecord(
                id=self.request_id.encode(),
                kind=self.kind.encode(),
                outcome=self.outcome.encode(),
                worker=worker_id,
                entry=self.entry_id,
                degraded=b"1" if self.degraded else b"0",
                duration_us=b"%d" % self.duration_us,
                session=self.session.encode(),
                agent=self.agent.encode(),
                d=self.decision,
                tool=self.tool.encode(),
                input=self.asked.encode(),
            )
        )


@dataclass(frozen=True, slots=True)
class Ack:
    """Acknowledge an entry without answering (expired, trimmed, answered elsewhere)."""

    entry_id: bytes


@dataclass(frozen=True, slots=True)
class Dead:
    """Move an entry to the dead-letter stream and acknowledge it."""

    entry_id: bytes
    fields: dict[bytes, bytes]
    deliveries: int
    reason: str


@dataclass(frozen=True, slots=True)
class Park:
    """Park a request for an operator (``park.lua``, packed by
    :mod:`~hookbus.workers.chain.parking`): atomic with its XACK, like a guarded reply.
    ``fallback`` answers it the usual way (``ask``) if its approval id is taken, ``crowded``
    by the kind's policy if its agent has its bound of approvals pending; ``parked`` is
    called once it is parked (the notification)."""

    entry_id: bytes
    command: bytes
    fallback: Reply
    parked: Callable[[], None]
    crowded: Reply | None = None


Op = Reply | Ack | Dead | Park


@dataclass(slots=True)
class Batch:
    """Packed commands answering some ops, where the reply scripts' results will be, and
    the entries answered without a guard (queued on the ledger once the batch was sent)."""

    commands: list[bytes]
    reply_slots: list[int]
    ledger: list[Item] = field(default_factory=list)
    unguarded: int = 0
    #: the lease epoch the unguarded answers were read in (all the same: they were checked)
    epoch: int | None = None
    #: where each park script's result will be, and its op
    parks: list[tuple[int, Park]] = field(default_factory=list)


class Replier:
    """Packs and sends one chain worker's answers; counts what was answered."""

    def __init__(
        self,
        client: redis.Redis,
        settings: Settings,
        keys: Keys,
        worker_id: str,
        heartbeat: Heartbeat,
        lease: OwnerLease | None = None,
        observes: Callable[[str], bool] | None = None,
    ) -> None:
        self.client = client
        #: whether observer hooks watch a kind: its answers are logged whatever
        #: ``streams.decision_log`` says (the observers are fed from the log)
        self.observes = observes
        self.settings = settings
        self.keys = keys
        self.worker_id = worker_id
        self.heartbeat = heartbeat
        #: None: every answer goes through the guarded script
        self.lease = lease
        self.ledger = AckLedger(
            client,
            keys,
            consumer=worker_id,
            decisions_maxlen=settings.streams.decisions_maxlen,
            heartbeat=heartbeat,
            lease=lease,
        )
        self.script_source = reqrep.reply_script_source()
        self.script_sha = hashlib.sha1(self.script_source.encode()).hexdigest()
        # the constant parts of every answer's EVALSHA, packed once (see reqrep.lua)
        self._sha_bulk = resp.bulk(self.script_sha)
        self._stream_keys = resp.bulk(keys.requests) + resp.bulk(keys.decisions)
        self._script_consts = b"".join(
            resp.bulk(a)
            for a in (
                CHAIN_GROUP,
                settings.streams.reply_ttl_s * 1000,
                reqrep.INBOX_MAXLEN,
            )
        )
        # the start of an unguarded reply: XADD <inbox> NOMKSTREAM MAXLEN ~ <n> * id
        self._inbox_tail = b"".join(
            resp.bulk(a)
            for a in ("NOMKSTREAM", "MAXLEN", "~", reqrep.INBOX_MAXLEN, "*", reqrep.INBOX_ID_FIELD)
        )
        # ARGV[4], the decision log's maxlen: 0 for answers the log leaves out
        self._log_all = settings.streams.decision_log == "all"
        self._log_some = settings.streams.decision_log == "not_allow"
        self._log_bulk = resp.bulk(settings.streams.decisions_maxlen)
        self._worker_bulk = resp.bulk(worker_id)
        self._worker_bytes = worker_id.encode()
        #: the lease epoch each entry was read in, until it is answered
        self._read_epochs: dict[bytes, int] = {}
        self.answered = 0
        self.duplicates = 0
        self.dead_lettered = 0

    def load_script(self) -> None:
        """SCRIPT LOAD the reply scripts (after a start or a Redis restart)."""
        self.client.script_load(self.script_source)
        self.client.script_load(self.ledger._script.script)
        self.client.script_load(scripts.source("park"))

    def read_epoch(self) -> int | None:
        """The lease epoch to stamp on what is read next (take it before the read)."""
        return self.lease.epoch if self.lease is not None else None

    def stamp(self, entry_ids: list[bytes], epoch: int | None) -> None:
        """Remember that ``entry_ids`` were read in ``epoch``."""
        if epoch is None:
            return
        if len(self._read_epochs) > 100_000:  # answers lost to errors: forget, stay guarded
            self._read_epochs.clear()
        for entry_id in entry_ids:
            self._read_epochs[entry_id] = epoch

    def _unguarded(self, entry_id: bytes) -> int | None:
        """The lease epoch ``entry_id`` was read in when it can be answered without the
        XACK guard, else None (and forget the entry)."""
        epoch = self._read_epochs.pop(entry_id, None)
        if epoch is not None and self.lease is not None and self.lease.holds(epoch):
            return epoch
        return None

    def reply_op(
        self,
        entry_id: bytes,
        event: Event,
        decision: Decision,
        duration_ms: float,
        *,
        guarded: bool = False,
    ) -> Reply:
        """The answer of ``event``; a reply key outside the namespace is not written (the
        entry is still acknowledged and the decision logged)."""
        mode = reqrep.reply_mode(self.keys, event.reply_to)
        if mode == "n" and event.reply_to:
            log.warning(
                "request %s names reply key %r outside namespace %s; not answered",
                event.id,
                event.reply_to,
                self.keys.ns,
            )
        if event.kind in GUARD_KINDS:  # the call's guard was asked: mark it so
            self.ledger.mark(guarded_names(event, decision.updated))
        tool, asked = summarise_input(event.payload)
        return Reply(
            entry_id=entry_id,
            key=resp.bulk(event.reply_to if mode != "n" and event.reply_to else self.keys.requests),
            mode=mode,
            decision=encode(decision),
            request_id=event.id,
            kind=event.kind,
            outcome=decision.outcome,
            degraded=decision.degraded,
            duration_us=int(duration_ms * 1000),
            session=event.session_id or "",
            agent=event.agent_id or "",
            logged=self._logs(decision, event.kind),
            guarded=guarded,
            tool=tool,
            asked=asked,
        )

    def script_call(self, replies: list[Reply]) -> bytes:
        """One EVALSHA of reqrep.lua answering ``replies`` (each acked and answered alone)."""
        n = len(replies)
        return b"".join(
            (
                resp.head(8 + 15 * n),
                _EVALSHA,
                self._sha_bulk,
                resp.bulk(2 + n),
                self._stream_keys,
                *(reply.key for reply in replies),
                self._script_consts,
                *(reply.script_args(self._log_bulk, self._worker_bulk) for reply in replies),
            )
        )

    def inbox_add(self, reply: Reply) -> bytes:
        """The unguarded answer: XADD to the inbox (NOMKSTREAM: a producer that left gets
        nothing), the request id and the decision."""
        return b"".join(
            (
                _INBOX_XADD,
                reply.key,
                self._inbox_tail,
                resp.bulk(reply.request_id),
                _DECISION_FIELD,
                resp.bulk(reply.decision),
            )
        )

    def _logs(self, decision: Decision, kind: str) -> bool:
        """Whether this answer goes to the decision log (``streams.decision_log``): all of
        them, or only what is not a plain allow (denials, asks, halts, rewrites, degraded),
        and always an answer of a kind observer hooks watch."""
        if self._log_all:
            return True
        if self._log_some and (
            decision.outcome != "allow" or decision.degraded or bool(decision.updated)
        ):
            return True
        return self.observes is not None and self.observes(kind)

    def flush(self, ops: list[Op]) -> None:
        """Answer / ack / dead-letter a batch now, in one pipelined round trip."""
        batch = self.commands(ops)
        if batch.commands:
            self.account(self.execute(batch.commands), batch)
        else:
            self.account([], batch)

    def commands(self, ops: list[Op]) -> Batch:
        """The packed commands answering ``ops``.

        Every guarded reply of ``ops`` goes in one script call, placed where the first one
        was (a request's reply still precedes its dead-lettering: the script's XACK wins).
        Unguarded replies are bare XADDs, first, in one MULTI/EXEC when there are several;
        their entries, and those of unguarded acks, go to the ledger once the batch is sent
        (:meth:`account`)."""
        batch = Batch(commands=[], reply_slots=[])
        commands = batch.commands
        guarded: list[Reply] = []
        inbox: list[bytes] = []
        script_at: int | None = None
        for op in ops:
            if isinstance(op, Reply):
                epoch = self._unguarded(op.entry_id)
                if epoch is not None and op.mode == "s" and not op.guarded:
                    batch.epoch = epoch
                    inbox.append(self.inbox_add(op))
                    batch.ledger.append(
                        (op.entry_id, op.record(self._worker_bytes) if op.logged else None)
                    )
                    batch.unguarded += 1
                    continue
                if script_at is None:
                    script_at = len(commands)
                    commands.append(b"")  # the script call, filled in below
                guarded.append(op)
            elif isinstance(op, Ack):
                epoch = self._unguarded(op.entry_id)
                if epoch is not None:
                    batch.epoch = epoch
                    batch.ledger.append((op.entry_id, None))
                else:
                    commands.append(resp.pack("XACK", self.keys.requests, CHAIN_GROUP, op.entry_id))
            elif isinstance(op, Park):
                self._read_epochs.pop(op.entry_id, None)
                batch.parks.append((len(commands), op))
                commands.append(op.command)
            else:
                self._read_epochs.pop(op.entry_id, None)
                commands.extend(self.dead_letter(op))
        if script_at is not None:
            commands[script_at] = self.script_call(guarded)
            batch.reply_slots.append(script_at)
        if len(inbox) > 1:
            # one transaction: a producer blocked on its inbox is woken once for the whole
            # batch, not once at the first reply and again for the rest (Redis serves
            # blocked readers after each command; about 7 % of async throughput here)
            inbox = [MULTI, *inbox, EXEC]
        if inbox:
            batch.commands[:0] = inbox
            batch.reply_slots = [slot + len(inbox) for slot in batch.reply_slots]
            batch.parks = [(slot + len(inbox), park) for slot, park in batch.parks]
        return batch

    def account(self, results: list[Any], batch: Batch) -> None:
        """After a batch was sent: count answers (a guarded one that lost its XACK was
        answered by another delivery) and queue the unguarded ones on the ledger."""
        answered = total = 0
        for slot in batch.reply_slots:
            won = results[slot]
            each = won if isinstance(won, list) else [won]  # a script call: one per reply
            total += len(each)
            answered += sum(1 for one in each if one == 1)
        self.answered += answered + batch.unguarded
        duplicates = total - answered
        if duplicates:
            self.duplicates += duplicates
            self.heartbeat.count("duplicates", duplicates)
        self.ledger.add(batch.ledger, batch.epoch)
        if batch.parks:
            self._parked(results, batch.parks)

    def _parked(self, results: list[Any], parks: list[tuple[int, Park]]) -> None:
        """Count parked requests, announce them, and answer the rare one whose approval id
        was taken (-1) the usual way."""
        fallbacks: list[Op] = []
        for slot, park in parks:
            won = results[slot] if slot < len(results) else 0
            if won == 1:
                self.answered += 1
                park.parked()
            elif won == -1:
                fallbacks.append(park.fallback)
            elif won == -2 and park.crowded is not None:
                self.heartbeat.count("approvals_crowded")
                fallbacks.append(park.crowded)
            elif won == 0:
                self.duplicates += 1
                self.heartbeat.count("duplicates")
        if fallbacks:
            log.warning(
                "%d request(s) not parked (approval id taken: ask answered to the agent; or "
                "the agent's approvals at their bound: answered by policy)",
                len(fallbacks),
            )
            self.flush(fallbacks)

    def settle(self, batch: Batch, results: list[Any]) -> None:
        """Count a sent batch's answers; resend the script calls Redis had lost."""
        if any(isinstance(r, redis.exceptions.NoScriptError) for r in results):
            results = self._resend_missing(batch.commands, results)
        for result in results:
            if isinstance(result, redis.exceptions.ResponseError):
                log.error("Redis refused an answer command: %s", result)
        self.account(results, batch)

    def execute(self, commands: list[bytes]) -> list[Any]:
        """Send a batch in one write on a pooled connection; load the scripts and resend
        the script calls when Redis had lost them.

        EVALSHA is sent directly rather than through redis-py's Script in a pipeline, which
        costs a SCRIPT EXISTS round trip per batch. NOSCRIPT (after a Redis restart or
        SCRIPT FLUSH) means that script call did not run; only those calls are sent again
        (the bare XADDs beside them did run).
        """
        results = send_pooled(self.client, commands)
        if any(isinstance(r, redis.exceptions.NoScriptError) for r in results):
            results = self._resend_missing(commands, results)
        for result in results:
            if isinstance(result, redis.exceptions.ResponseError):
                raise result
        return results

    def _resend_missing(self, commands: list[bytes], results: list[Any]) -> list[Any]:
        self.load_script()
        missing = [
            i for i, r in enumerate(results) if isinstance(r, redis.exceptions.NoScriptError)
        ]
        again = send_pooled(self.client, [commands[i] for i in missing])
        merged = list(results)
        for i, result in zip(missing, again, strict=True):
            merged[i] = result
        return merged

    def dead_letter(self, op: Dead) -> list[bytes]:
        """XADD to the dead letters (with the request, when there is one) and XACK."""
        fields: list[Any] = [
            *("stream", self.keys.requests, "entry_id", op.entry_id, "group", CHAIN_GROUP),
            *("deliveries", op.deliveries, "reason", op.reason, "worker", self.worker_id),
        ]
        if reqrep.REQUEST_FIELD in op.fields:
            fields += ["e", op.fields[reqrep.REQUEST_FIELD]]
        self.dead_lettered += 1
        self.heartbeat.count("dead_lettered")
        maxlen = self.settings.streams.requests_maxlen
        return [
            resp.pack("XADD", self.keys.dead_letters, "MAXLEN", "~", maxlen, "*", *fields),
            resp.pack("XACK", self.keys.requests, CHAIN_GROUP, op.entry_id),
        ]
