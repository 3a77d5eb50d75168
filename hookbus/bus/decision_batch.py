"""Decision-log entries that hold several decisions: how a chain worker logs without paying
one Redis command per request.

A chain worker whose ownership lease holds answers a request with one XADD to the
producer's inbox and logs the decision later, together with the XACKs of everything it
answered since (:mod:`hookbus.workers.chain.ledger`): one stream entry ``b=<msgpack list>
n=<count>`` per flush. Each record of the list has exactly the fields a single-decision
entry has (``id``, ``kind``, ``outcome``, ``worker``, ``entry``, ``degraded``,
``duration_us``, ``session``, ``agent``, ``d``, and ``tool`` / ``input``: the tool asked
about and its input summed up, absent from records of older workers), so readers call
:func:`expand` on every entry and handle both shapes the same way: entries written by the
guarded path (``reqrep.lua``), by fan-out jobs or by older workers stay single.

The list is decoded with a bound on its size: the decision log is read by operators'
tools, and a malformed entry must cost one skipped entry, not a crash.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import msgspec

if TYPE_CHECKING:
    import redis


#: Field of a batch entry holding the msgpack list of records, and the one with its count.
BATCH_FIELD = b"b"
COUNT_FIELD = b"n"
#: Most records one batch entry may hold (a flush is cut at this many).
MAX_RECORDS = 512

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(list[dict[str, bytes]])


class DecisionRecord(msgspec.Struct):
    """One answer's record, as a chain worker writes it: encodes to the same msgpack map as
    a dict of these fields (and builds several times faster, on the answer path)."""

    id: bytes
    kind: bytes
    outcome: bytes
    worker: bytes
    entry: bytes
    degraded: bytes
    duration_us: bytes
    session: bytes
    agent: bytes
    d: bytes
    tool: bytes = b""
    input: bytes = b""


def encode_record(record: DecisionRecord | dict[str, bytes]) -> bytes:
    """One record, msgpack-encoded: a worker encodes each as it answers, and a flush only
    joins them (:func:`join_records`)."""
    return _encoder.encode(record)


def join_records(encoded: list[bytes]) -> bytes:
    """The ``b`` field of a batch entry from records encoded one by one: a msgpack array
    header, then the records as they are."""
    n = len(encoded)
    if n < 16:
        header = bytes((0x90 | n,))
    elif n < 65536:
        header = b"\xdc" + n.to_bytes(2, "big")
    else:
        header = b"\xdd" + n.to_bytes(4, "big")
    return header + b"".join(encoded)


def expand(fields: dict[Any, Any]) -> list[dict[bytes, bytes]]:
    """The decisions one decision-log entry holds, each as a single entry's fields.

    A single-decision entry comes back as itself; a batch entry as its records (field
    names and values as bytes, as redis-py returns them); a batch that does not decode
    as nothing (and the caller's tools go on with the next entry)."""
    blob = fields.get(BATCH_FIELD)
    if blob is None:
        blob = fields.get(BATCH_FIELD.decode())
    if blob is None:
        return [fields]
    try:
        records = _decoder.decode(blob if isinstance(blob, bytes) else str(blob).encode())
    except (msgspec.DecodeError, msgspec.ValidationError):
        return []
    return [
        {name.encode(): value for name, value in record.items()} for record in records[:MAX_RECORDS]
    ]


def logged(client: redis.Redis, stream: str) -> list[dict[bytes, bytes]]:
    """Every decision a decision-log stream holds, oldest first, batches expanded (for
    tools and tests; ``hookbus replay`` and ``hookbus tail`` page through it instead)."""
    entries = cast("list[tuple[bytes, dict[Any, Any]]]", client.xrange(stream))
    return [record for _, fields in entries for record in expand(fields)]
