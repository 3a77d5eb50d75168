"""Answering blocking requests: the reply script's packed calls, acks and dead letters.

Every answer goes through ``reqrep.lua`` (shipped in :mod:`hookbus.bus`): XACK, reply and
decision-log entry in one atomic call, and only for the delivery whose XACK wins, so a
request run twice (stolen from a slow worker) is answered once. Commands are packed in RESP
by hand and sent on raw connections: several times cheaper than redis-py's pipeline on
this hot path, and a batch's answers can ride in the same write as the next read.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis
import redis.exceptions

from hookbus.bus import reqrep
from hookbus.bus.keys import CHAIN_GROUP, Keys
from hookbus.bus.wire import Decision, Event, encode

if TYPE_CHECKING:
    from hookbus.bus.settings import Settings
    from hookbus.workers.heartbeat import Heartbeat

log = logging.getLogger(__name__)

#: Socket timeout while reading replies on a raw connection, in s: a blocking read (at most
#: 0.5 s, see chain_reader.READ_BLOCK_MS) plus room for a busy server.
RAW_READ_TIMEOUT_S = 10.5


@dataclass(frozen=True, slots=True)
class Reply:
    """Answer a request: its reply key and its 12 arguments of reqrep.lua, packed (the
    replies of one flush share one EVALSHA)."""

    entry_id: bytes
    key: bytes
    args: bytes


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


Op = Reply | Ack | Dead


def send_raw(conn: Any, commands: list[bytes]) -> list[Any]:
    """Write packed ``commands`` at once on ``conn`` and read every reply."""
    conn.send_packed_command([b"".join(commands)], check_health=False)
    return read_replies(conn, len(commands))


def read_replies(conn: Any, n: int) -> list[Any]:
    """Read ``n`` replies; error replies come back as exception objects, in place."""
    results: list[Any] = []
    for _ in range(n):
        try:
            results.append(conn.read_response(timeout=RAW_READ_TIMEOUT_S))
        except redis.exceptions.ResponseError as exc:
            results.append(exc)
    return results


class Replier:
    """Packs and sends one chain worker's answers; counts what was answered."""

    def __init__(
        self,
        client: redis.Redis,
        settings: Settings,
        keys: Keys,
        worker_id: str,
        heartbeat: Heartbeat,
    ) -> None:
        self.client = client
        self.settings = settings
        self.keys = keys
        self.worker_id = worker_id
        self.heartbeat = heartbeat
        self.script_source = reqrep.reply_script_source()
        self.script_sha = hashlib.sha1(self.script_source.encode()).hexdigest()
        # the constant parts of every answer's EVALSHA, packed once (see reqrep.lua)
        self._sha_bulk = reqrep.bulk(self.script_sha)
        self._stream_keys = reqrep.bulk(keys.requests) + reqrep.bulk(keys.decisions)
        self._script_consts = b"".join(
            reqrep.bulk(a)
            for a in (
                CHAIN_GROUP,
                settings.streams.reply_ttl_s * 1000,
                reqrep.INBOX_MAXLEN,
            )
        )
        # ARGV[4], the decision log's maxlen: 0 for answers the log leaves out
        self._log_all = settings.streams.decision_log == "all"
        self._log_some = settings.streams.decision_log == "not_allow"
        self._log_bulk = reqrep.bulk(settings.streams.decisions_maxlen)
        self._worker_bulk = reqrep.bulk(worker_id)
        self.answered = 0
        self.duplicates = 0
        self.dead_lettered = 0

    def load_script(self) -> None:
        """SCRIPT LOAD the reply script (after a start or a Redis restart)."""
        self.client.script_load(self.script_source)

    def reply_op(
        self, entry_id: bytes, event: Event, decision: Decision, duration_ms: float
    ) -> Reply:
        """The packed answer of ``event``; a reply key outside the namespace is not written
        (the entry is still acknowledged and the decision logged)."""
        mode = reqrep.reply_mode(self.keys, event.reply_to)
        if mode == "n" and event.reply_to:
            log.warning(
                "request %s names reply key %r outside namespace %s; not answered",
                event.id,
                event.reply_to,
                self.keys.ns,
            )
        bulk = reqrep.bulk
        key = bulk(event.reply_to if mode != "n" and event.reply_to else self.keys.requests)
        args = b"".join(
            (
                self._log_bulk if self._logs(decision) else b"$1\r\n0\r\n",
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
        return Reply(entry_id=entry_id, key=key, args=args)

    def script_call(self, replies: list[Reply]) -> bytes:
        """One EVALSHA of reqrep.lua answering ``replies`` (each acked and answered alone)."""
        n = len(replies)
        return b"".join(
            (
                b"*%d\r\n$7\r\nEVALSHA\r\n" % (8 + 13 * n),
                self._sha_bulk,
                reqrep.bulk(2 + n),
                self._stream_keys,
                *(reply.key for reply in replies),
                self._script_consts,
                *(reply.args for reply in replies),
            )
        )

    def _logs(self, decision: Decision) -> bool:
        """Whether this answer goes to the decision log (``streams.decision_log``): all of
        them, or only what is not a plain allow (denials, asks, halts, rewrites, degraded)."""
        if self._log_all:
            return True
        return self._log_some and (
            decision.outcome != "allow" or decision.degraded or bool(decision.updated)
        )

    def flush(self, ops: list[Op]) -> None:
        """Answer / ack / dead-letter a batch now, in one pipelined round trip."""
        commands, slots = self.commands(ops)
        self.account(self.execute(commands), slots)

    def commands(self, ops: list[Op]) -> tuple[list[bytes], list[int]]:
        """The packed commands answering ``ops`` and the positions of the reply scripts.

        Every reply of ``ops`` goes in one script call, placed where the first reply was (a
        request's reply still precedes its dead-lettering: the script's XACK wins)."""
        commands: list[bytes] = []
        reply_slots: list[int] = []
        replies = [op for op in ops if isinstance(op, Reply)]
        for op in ops:
            if isinstance(op, Reply):
                if not reply_slots:
                    reply_slots.append(len(commands))
                    commands.append(self.script_call(replies))
            elif isinstance(op, Ack):
                commands.append(
                    reqrep.pack_command("XACK", self.keys.requests, CHAIN_GROUP, op.entry_id)
                )
            else:
                commands.extend(self.dead_letter(op))
        return commands, reply_slots

    def account(self, results: list[Any], reply_slots: list[int]) -> None:
        """Count answers that won their XACK; the rest were answered by another delivery."""
        answered = total = 0
        for slot in reply_slots:
            won = results[slot]
            each = won if isinstance(won, list) else [won]  # a script call: one per reply
            total += len(each)
            answered += sum(1 for one in each if one == 1)
        self.answered += answered
        duplicates = total - answered
        if duplicates:
            self.duplicates += duplicates
            self.heartbeat.count("duplicates", duplicates)

    def settle(self, commands: list[bytes], slots: list[int], results: list[Any]) -> None:
        """Count a sent batch's answers; resend it when Redis had lost the reply script."""
        if any(isinstance(r, redis.exceptions.NoScriptError) for r in results):
            results = self.execute(commands)
        for result in results:
            if isinstance(result, redis.exceptions.ResponseError):
                log.error("Redis refused an answer command: %s", result)
        self.account(results, slots)

    def execute(self, commands: list[bytes]) -> list[Any]:
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
                results = send_raw(conn, commands)
            finally:
                pool.release(conn)
            missing = any(isinstance(r, redis.exceptions.NoScriptError) for r in results)
            if not missing:
                break
            if attempt == 0:
                self.load_script()
        for result in results:
            if isinstance(result, redis.exceptions.ResponseError):
                raise result
        return results

    def dead_letter(self, op: Dead) -> list[bytes]:
        """XADD to the dead letters (with the request, when there is one) and XACK."""
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
