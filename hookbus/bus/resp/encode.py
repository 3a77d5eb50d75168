"""RESP2 encoding: the one place commands are packed by hand.

Every connection hookbus drives itself (the per-event hook's socket, the chain worker's
replies and ack flushes, the producers' request XADDs and inbox reads) packs its commands
here: several times cheaper than redis-py's general packer on those paths, and one
encoder, so an argument count can never disagree with the arguments that follow it.
Hot paths pack their constant parts once (:func:`head`, :func:`bulk`) and join the
per-call parts to them. Standard library only.
"""

from __future__ import annotations

Arg = bytes | str | int | float
"""One command argument: bytes go as they are, anything else as its ``str``, UTF-8."""


def bulk(arg: Arg) -> bytes:
    """One RESP bulk string."""
    data = arg if type(arg) is bytes else str(arg).encode()
    return b"$%d\r\n%s\r\n" % (len(data), data)


def head(count: int) -> bytes:
    """The array header of a command of ``count`` arguments (name included)."""
    return b"*%d\r\n" % count


def pack(*args: Arg) -> bytes:
    """One command: an array of bulk strings."""
    return head(len(args)) + b"".join([bulk(arg) for arg in args])


def prefix(total: int, *args: Arg) -> bytes:
    """The start of a command of ``total`` arguments whose first ones are ``args``: the
    caller appends the remaining ``total - len(args)`` bulk strings per call."""
    if total < len(args):
        raise ValueError(f"a command of {total} arguments cannot start with {len(args)}")
    return head(total) + b"".join([bulk(arg) for arg in args])


#: MULTI and EXEC, packed.
MULTI = pack("MULTI")
EXEC = pack("EXEC")
