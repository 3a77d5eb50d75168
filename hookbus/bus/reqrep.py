"""The request/reply protocol shared by producers (the SDK) and chain workers.

A blocking request is one entry ``e=<msgpack Event>`` in the stream ``hookbus:{ns}:req``
(consumer group ``chain``). Every call stamps the event with a fresh ``request_id`` (uuid4
hex, even when the same :class:`Event` is sent again), its ``budget_ms`` (the time it had
left when sent), the old absolute ``deadline`` (producer clock, for workers that predate
``budget_ms``) and ``reply_to``, the key the answer goes to:

* ``hookbus:{ns}:inbox:<id>``: a stream, entries ``id=<request id> d=<decision>``: one per
  request connection of the sync client (read with XREAD BLOCK pipelined right behind the
  XADD: one round trip), one per asyncio client (read by one reader task). The producer
  creates its inbox and keeps it alive (:mod:`hookbus.producers.inbox_ttl`, off the
  per-request path);
  the worker adds with NOMKSTREAM and no PEXPIRE, so a reply costs one command;
* ``hookbus:{ns}:rep:<request id>``: a list holding one msgpack :class:`Decision`, popped
  with BLPOP by the lean agent-CLI adapters (the worker sets its expiry).

With ``partitions`` > 1 the request stream and the inboxes are those of the session's
partition (``{ns:p}``, :meth:`Keys.for_partition`), so the reply script touches one slot.

A decision carries the ``request_id`` it answers; the producer drops one that does not
match its call (:func:`reply_matches`). The worker answers through ``reqrep.lua`` (XACK,
reply, decision log in one atomic call), so a request delivered twice is answered once.
Workers judge deadlines by Redis server time (:class:`ServerClock`), never by the
producer's clock.

This module imports msgspec and the core, not redis-py: it is on the producer's import path.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import msgspec

from hookbus.bus import resp
from hookbus.bus.keys import ENTRY_FIELD, Keys
from hookbus.bus.kinds import Catalogue, KindSpec
from hookbus.bus.wire import (
    Decision,
    Event,
    check_payload,
    decode,
    encode,
    new_request_id,
    now_ms,
)
from hookbus.errors import EventTooLarge, InvalidPayload, KindCannotBlock, WireError

if TYPE_CHECKING:
    import redis

#: Field of a request stream entry holding the msgpack event.
REQUEST_FIELD = ENTRY_FIELD
#: Fields of an inbox stream entry: the request id and the msgpack decision.
INBOX_ID_FIELD = b"id"
INBOX_DECISION_FIELD = b"d"
#: Approximate MAXLEN of one producer's inbox stream (its reader keeps it near empty).
INBOX_MAXLEN = 10_000
#: How often a worker re-reads Redis TIME to correct its clock offset, in seconds.
CLOCK_REFRESH_S = 1.0
#: TIME samples a :class:`ServerClock` chooses its offset from (the shortest round trip
#: wins): at one a second, a stall would have to span this many seconds to be used.
CLOCK_SAMPLES = 8

ReplyMode = Literal["l", "s", "n"]
"""How a worker answers: ``l`` push to a reply list, ``s`` add to an inbox stream, ``n`` not."""


def reply_script_source() -> str:
    """The Lua script that answers exactly once (``reqrep.lua``, shipped as package data)."""
    from hookbus.bus import lua

    return lua.source("hookbus.bus", "reqrep.lua")


@dataclass(frozen=True, slots=True)
class PreparedRequest:
    """A request ready to send: the event as sent, its bytes, and the policy inputs."""

    event: Event
    data: bytes
    deadline_ms: int
    on_timeout: Literal["allow", "deny"]

    @property
    def request_id(self) -> str:
        """This call's id (the event as sent always has one)."""
        return self.event.request_id or ""


def prepare_request(
    event: Event,
    *,
    catalogue: Catalogue | None = None,
    spec: KindSpec | None = None,
    keys: Keys,
    budget_ms: int | None,
    default_budget_ms: int,
    on_timeout: Literal["allow", "deny"] | None,
    default_on_timeout: Literal["allow", "deny"],
    reply_to: str | None,
    max_event_bytes: int,
) -> PreparedRequest:
    """Canonicalise the kind, stamp request id, budget, deadline and reply key, encode,
    check the payload and the size.

    Raises :class:`UnknownEventKind` / :class:`KindCannotBlock` / :class:`InvalidPayload` /
    :class:`EventTooLarge`: these are the caller's mistakes, not bus trouble, so even
    non-strict requests raise.
    """
    if spec is None:
        if catalogue is None:
            raise TypeError("prepare_request needs a catalogue or the kind's spec")
        spec = catalogue.resolve(event.kind)
    if not spec.may_block:
        raise KindCannotBlock(spec.kind)
    budget = budget_ms if budget_ms is not None else default_budget_ms
    if budget <= 0:
        raise ValueError(f"deadline_ms must be > 0, got {budget}")
    request_id = new_request_id()
    sent = msgspec.structs.replace(
        event,
        kind=spec.kind,
        request_id=request_id,
        budget_ms=budget,
        deadline=now_ms() + budget,
        reply_to=reply_to if reply_to is not None else keys.reply(request_id),
    )
    data = encode_event(sent, max_event_bytes)
    return PreparedRequest(
        event=sent, data=data, deadline_ms=budget, on_timeout=on_timeout or default_on_timeout
    )


def encode_event(event: Event, max_event_bytes: int) -> bytes:
    """``event`` as msgpack, once its payload and meta pass :func:`check_payload` and its
    size is within ``max_event_bytes``; what cannot be encoded is an :class:`InvalidPayload`
    (never a raw TypeError / OverflowError / RecursionError)."""
    check_payload(event.payload)
    check_payload(event.meta, field="meta")
    try:
        data = encode(event)
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:
        raise InvalidPayload("fields", f"cannot be encoded as msgpack ({exc})") from exc
    if len(data) > max_event_bytes:
        raise EventTooLarge(len(data), max_event_bytes)
    return data


def decode_reply(raw: bytes) -> Decision | WireError:
    """The decision in a reply, or the :class:`WireError` saying why it is not one (the
    caller answers that by policy; a reader task must not raise on a bad entry)."""
    try:
        return decode(raw, Decision)
    except WireError as exc:
        return exc


def reply_matches(decision: Decision, prepared: PreparedRequest) -> bool:
    """Whether ``decision`` answers this call.

    A decision must carry this call's ``request_id``. Workers that predate request ids
    answer with the event's own id; that is still accepted on a reply list (its key is this
    call's fresh request id, so no other call's reply can land there), and on the async
    inbox, where it is the only way an old worker's reply is matched at all.
    """
    rid = decision.request_id
    return rid == prepared.request_id or (rid is not None and rid == prepared.event.id)


def request_xadd_head(requests_key: str) -> bytes:
    """``XADD <requests> * e``, packed: every request's command up to its data (one more
    bulk string), built once per lane. No MAXLEN: the chain workers trim only what every
    consumer group took, and a producer's backlog gate refuses while the stream holds its
    limit."""
    return resp.prefix(5, "XADD", requests_key, "*", REQUEST_FIELD)


def decode_request(fields: dict[bytes, bytes]) -> Event:
    """The event of a request stream entry; :class:`WireError` when it is not one."""
    raw = fields.get(REQUEST_FIELD)
    if raw is None:
        raise WireError("request entry has no 'e' field", field="$")
    return decode(raw, Event)


def reply_mode(keys: Keys, reply_to: str | None) -> ReplyMode:
    """How to answer ``reply_to``: only keys of this namespace's reply or inbox families.

    A producer cannot make a worker write anywhere else (a request naming the bundle stamp
    as its reply key gets no reply, and the worker logs it).
    """
    if not reply_to:
        return "n"
    if reply_to.startswith(_reply_prefix(keys)) and len(reply_to) > len(_reply_prefix(keys)):
        return "l"
    if reply_to.startswith(_inbox_prefix(keys)) and len(reply_to) > len(_inbox_prefix(keys)):
        return "s"
    return "n"


def _reply_prefix(keys: Keys) -> str:
    return keys.reply("")


def _inbox_prefix(keys: Keys) -> str:
    return keys.inbox("")


def blpop_timeout_s(time_left_s: float) -> int:
    """The server-side BLPOP timeout sent with a request: whole seconds, always >= 1 and
    longer than the client will wait, so Redis never answers "timeout" before the client's
    own deadline does (Redis rounds block timeouts to ~100 ms, and a timeout < 1 ms can
    block forever). The client abandons the connection at its deadline instead."""
    return int(time_left_s) + 2


class ServerClock:
    """Redis server time, estimated locally: one TIME per ``refresh_s``, then monotonic.

    A worker must not trust producers' clocks (the deadline is absolute epoch ms written by
    the producer, and hosts drift), nor pay a TIME round trip per request. Each TIME sample
    gives an offset taken at the midpoint of its round trip, so its error is under half that
    round trip; a sample whose round trip spanned a stall (Redis paused, a GC, a full
    socket buffer) could be off by half the stall. So the clock keeps the last
    :data:`CLOCK_SAMPLES` samples and uses the one with the shortest round trip: a stalled
    sample never replaces a good one, and the local monotonic clock drifts from Redis's by
    parts per million over the window, far below a round trip.
    """

    def __init__(self, refresh_s: float = CLOCK_REFRESH_S) -> None:
        self.refresh_s = refresh_s
        self._offset_ms: float | None = None
        self._refreshed_at = -1e18
        self._lock = threading.Lock()
        #: (round trip in ms, offset in ms) of the latest samples, oldest first.
        self._samples: deque[tuple[float, float]] = deque(maxlen=CLOCK_SAMPLES)

    @property
    def synced(self) -> bool:
        return self._offset_ms is not None

    @property
    def best_rtt_ms(self) -> float | None:
        """Round trip of the sample the offset comes from (None before the first)."""
        with self._lock:
            return min(rtt for rtt, _ in self._samples) if self._samples else None

    def due(self) -> bool:
        return time.monotonic() - self._refreshed_at >= self.refresh_s

    def refresh(self, client: redis.Redis) -> None:
        """Read TIME now (connection errors propagate; the caller backs off)."""
        before = time.monotonic()
        seconds, micros = client.time()
        after = time.monotonic()
        self.add_sample(before, seconds * 1000 + micros / 1000, after)

    def add_sample(self, sent_s: float, server_ms: float, received_s: float) -> None:
        """Take one TIME sample (monotonic send and receive times, in s, around Redis's
        answer, in epoch ms) and move the offset to the best sample kept."""
        rtt_ms = (received_s - sent_s) * 1000
        offset = server_ms - (sent_s + received_s) * 500
        with self._lock:
            self._samples.append((rtt_ms, offset))
            self._offset_ms = min(self._samples)[1]
            self._refreshed_at = received_s

    def now_ms(self) -> float:
        """Server time in epoch ms (local wall clock until the first refresh)."""
        offset = self._offset_ms
        if offset is None:
            return float(now_ms())
        return time.monotonic() * 1000 + offset

    def time_left_ms(self, event: Event) -> float | None:
        """Milliseconds until ``event.deadline`` by server time; None without a deadline."""
        if event.deadline is None:
            return None
        return event.deadline - self.now_ms()
