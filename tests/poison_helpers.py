"""Helpers shared by ``test_worker_poison.py`` and the test modules that
need the same set-up (a test module never imports another)."""

from __future__ import annotations

from typing import Any

import msgspec


def deep_event_bytes(depth: int, **fields: Any) -> bytes:
    """A msgpack Event whose payload holds arrays nested ``depth`` deep (built by hand:
    msgspec would refuse to encode it)."""
    inner = b"\x90"
    for _ in range(depth):
        inner = b"\x91" + inner
    head = {"kind": "PreToolUse", **fields}
    body = b"".join(msgspec.msgpack.encode(k) + msgspec.msgpack.encode(v) for k, v in head.items())
    return (
        bytes([0x80 | (len(head) + 1)])
        + body
        + msgspec.msgpack.encode("payload")
        + b"\x81"
        + msgspec.msgpack.encode("x")
        + inner
    )
