"""Finding the answers a dead worker gave but never settled.

A chain worker answers with a bare XADD to the producer's inbox and settles the entry's
XACK and decision-log record later, in bulk (:mod:`~hookbus.workers.chain.ledger`). A worker
killed between the two leaves answered entries pending. When the reclaimer takes them over
it looks for each one's reply in its producer's inbox (the reply carries the request id):
a request found answered is not run again, and its decision is logged from the reply,
marked ``recovered``. This is best effort by nature: a producer trims what it has read
from its inbox, and an inbox whose producer left has expired; such an answer is not found,
and the entry is handled as one that was never answered (run again while its deadline
holds, otherwise dropped as expired), which is what happened before answers were deferred.
"""

from __future__ import annotations

import logging
from typing import Any

import redis

from hookbus.approvals.model import summarise_input
from hookbus.bus import reqrep
from hookbus.bus.decision_batch import encode_record
from hookbus.bus.keys import Keys
from hookbus.bus.wire import Decision, decode
from hookbus.errors import WireError
from hookbus.workers.chain.ledger import Record
from hookbus.workers.entry_decoding import decode_event
from hookbus.workers.unguarded.marks import guarded_names

log = logging.getLogger(__name__)

#: Inbox entries read per taken-over request, from the request's own time on.
SCAN_COUNT = 1_000


def _entry_ms(entry_id: bytes) -> int:
    return int(entry_id.split(b"-", 1)[0])


def recover_answers(
    client: redis.Redis,
    keys: Keys,
    claimed: list[tuple[bytes, dict[bytes, bytes]]],
    *,
    max_event_bytes: int,
    marks: list[bytes] | None = None,
) -> dict[bytes, Record]:
    """The decision-log record of each taken-over entry whose reply is in its inbox; the
    marks of the tool calls those answers guarded are added to ``marks`` (the dead worker
    may not have written them)."""
    wanted: list[tuple[bytes, bytes, str, Any]] = []  # entry id, request id, inbox, event
    for entry_id, fields in claimed:
        raw = fields.get(reqrep.REQUEST_FIELD)
        if raw is None:
            continue
        try:
            event = decode_event(raw, max_bytes=max_event_bytes)
        except WireError:
            continue
        if reqrep.reply_mode(keys, event.reply_to) != "s" or not event.reply_to:
            continue
        wanted.append((entry_id, event.id.encode(), event.reply_to, event))
    if not wanted:
        return {}
    pipe = client.pipeline(transaction=False)
    for entry_id, _, inbox, _ in wanted:
        pipe.xrange(inbox, f"{_entry_ms(entry_id)}-0", "+", count=SCAN_COUNT)
    found: dict[bytes, Record] = {}
    for (entry_id, request_id, _, event), replies in zip(
        wanted, pipe.execute(raise_on_error=False), strict=True
    ):
        if not isinstance(replies, list):
            continue
        for _, reply in replies:
            if reply.get(reqrep.INBOX_ID_FIELD) != request_id:
                continue
            blob = reply.get(reqrep.INBOX_DECISION_FIELD, b"")
            try:
                decision = decode(blob, Decision)
            except WireError:
                break
            if marks is not None:
                marks.extend(guarded_names(event, decision.updated))
            tool, asked = summarise_input(event.payload)
            found[entry_id] = encode_record(
                {
                    "id": request_id,
                    "kind": event.kind.encode(),
                    "outcome": decision.outcome.encode(),
                    "worker": (decision.worker or "").encode(),
                    "entry": entry_id,
                    "degraded": b"1" if decision.degraded else b"0",
                    "duration_us": b"",
                    "session": (event.session_id or "").encode(),
                    "agent": (event.agent_id or "").encode(),
                    "d": blob,
                    "recovered": b"1",
                    "tool": tool.encode(),
                    "input": asked.encode(),
                }
            )
            break
    if found:
        log.warning(
            "%d taken-over request(s) had been answered by their dead worker: logged from "
            "their replies, not run again",
            len(found),
        )
    return found
