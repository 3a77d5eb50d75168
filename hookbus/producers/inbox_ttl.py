"""Keeping a producer's reply inbox alive, off the per-request path, with no script.

Workers answer into an inbox stream with ``XADD NOMKSTREAM`` and no ``PEXPIRE``
(``reqrep.lua``): one Redis command per reply instead of two, and a reply to a producer that
has gone (its inbox expired) is dropped rather than left behind as a key nobody reads. So the
producer owns its inbox's life: it creates it and sets its expiry, packed into the same write
as a request whenever the expiry is less than half the ttl (plus the request's budget) away:
about once per :data:`INBOX_TTL_MS` / 2 per inbox, however many requests go through it.

The renewal is a ``MULTI`` / ``XGROUP CREATE <inbox> keepalive $ MKSTREAM`` / ``PEXPIRE`` /
``EXEC``: ``MKSTREAM`` creates an empty inbox when it is missing and leaves an existing one
(and the replies not read yet) untouched; on an existing inbox the ``XGROUP CREATE`` answers
``BUSYGROUP`` inside the ``EXEC`` reply, which is expected. No ``EVAL``: a producer's Redis
user needs no script rights, so its credential cannot run Lua of its choosing (a script that
loops holds every client of the server).

The local estimate of the expiry is conservative (taken before the write goes out), and a
write that fails forgets it, so the next request renews the inbox first.
"""

from __future__ import annotations

import time
from typing import Any

from hookbus.bus import resp

#: Expiry of a reply inbox, renewed by its producer while it sends requests, in ms.
INBOX_TTL_MS = 60_000
#: Consumer group made on an inbox only so ``XGROUP CREATE ... MKSTREAM`` creates it.
KEEPALIVE_GROUP = "keepalive"
#: Replies a renewal takes in a pipeline: MULTI, two QUEUED, EXEC.
RENEWAL_REPLIES = 4


def renewal_failure(replies: list[Any]) -> BaseException | None:
    """The error that makes a renewal's replies (:data:`RENEWAL_REPLIES` of them) a
    failure, else None: ``BUSYGROUP`` (the inbox exists) is success, a refused ``MULTI``,
    ``PEXPIRE`` or ``EXEC`` (no such right, an aborted transaction) is not."""
    for reply in replies[:3]:
        if isinstance(reply, BaseException):
            return reply
    executed = replies[3]
    if isinstance(executed, BaseException):
        return executed
    if not isinstance(executed, list) or len(executed) != 2:
        return RuntimeError(f"unexpected EXEC reply to an inbox renewal: {executed!r}")
    created, expiry = executed
    if isinstance(created, BaseException) and "BUSYGROUP" not in str(created):
        return created
    if isinstance(expiry, BaseException):
        return expiry
    return None


class InboxTTL:
    """When one inbox needs its keepalive, and the packed commands that renew it."""

    def __init__(self, inbox: str, ttl_ms: int = INBOX_TTL_MS) -> None:
        self.inbox = inbox
        self.ttl_ms = ttl_ms
        self._expires = 0.0  # monotonic s; 0: unknown (renew before the next request)

    def renewal_commands(self, budget_ms: float) -> list[tuple[Any, ...]]:
        """The :data:`RENEWAL_REPLIES` commands to send ahead of a request with
        ``budget_ms`` to live, when the inbox might expire before that request's reply
        could arrive; else none."""
        now = time.monotonic()
        if self._expires - now > (self.ttl_ms / 2 + budget_ms) / 1000:
            return []
        self._expires = now + self.ttl_ms / 1000
        return [
            ("MULTI",),
            ("XGROUP", "CREATE", self.inbox, KEEPALIVE_GROUP, "$", "MKSTREAM"),
            ("PEXPIRE", self.inbox, self.ttl_ms),
            ("EXEC",),
        ]

    def renewal(self, budget_ms: float) -> bytes | None:
        """:meth:`renewal_commands`, packed in RESP (None when none are due)."""
        commands = self.renewal_commands(budget_ms)
        if not commands:
            return None
        return b"".join(resp.pack(*command) for command in commands)

    def forget(self) -> None:
        """The last renewal may not have reached Redis: renew with the next request."""
        self._expires = 0.0
