"""The serializer of hookbus's RQ jobs: msgpack through msgspec, never pickle.

RQ's default serializer is pickle: anyone who can write to the RQ Redis could then run
code on every worker. msgpack decodes to plain data only (dicts, lists, strings, bytes,
numbers), and carries raw bytes natively, so a job's argument is the event exactly as the
producer encoded it in the event log: no re-encoding on the dispatcher.

What RQ stores through it: the job's ``(func_name, instance, args, kwargs)`` tuple, its
``meta`` dict and its return value (a :class:`HookRun` as plain data). A tuple comes back
as a list, which RQ unpacks the same way.
"""

from __future__ import annotations

from typing import Any

import msgspec

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder()


class MsgpackSerializer:
    """RQ serializer protocol (``dumps`` / ``loads``) over msgspec's msgpack codec."""

    @staticmethod
    def dumps(obj: Any, /) -> bytes:
        return _encoder.encode(obj)

    @staticmethod
    def loads(data: bytes, /) -> Any:
        return _decoder.decode(data)


#: Import path RQ workers and CLIs are given (``rq worker --serializer ...``).
SERIALIZER_PATH = "hookbus.workers.fanout.serializer.MsgpackSerializer"
