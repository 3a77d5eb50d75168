"""Keeping a producer's reply inbox alive, off the per-request path.

Workers answer into an inbox stream with ``XADD NOMKSTREAM`` and no ``PEXPIRE``
(``reqrep.lua``): one Redis command per reply instead of two, and a reply to a producer that
has gone (its inbox expired) is dropped rather than left behind as a key nobody reads. So the
producer owns its inbox's life: it creates it and sets its expiry with
``inbox_keepalive.lua``, packed into the same write as a request whenever the expiry is
less than half the ttl (plus the request's budget) away: about once per
:data:`INBOX_TTL_MS` / 2 per inbox, however many requests go through it.

The local estimate of the expiry is conservative (taken before the write goes out), and a
write that fails forgets it, so the next request renews the inbox first.
"""

from __future__ import annotations

import time

from hookbus.bus import resp

#: Expiry of a reply inbox, renewed by its producer while it sends requests, in ms.
INBOX_TTL_MS = 60_000

_source: str | None = None


def keepalive_source() -> str:
    """``inbox_keepalive.lua`` (package data), read once per process."""
    global _source
    if _source is None:
        from importlib import resources

        path = resources.files("hookbus.bus").joinpath("inbox_keepalive.lua")
        _source = path.read_text(encoding="utf-8")
    return _source


class InboxTTL:
    """When one inbox needs its keepalive, and the packed command that renews it."""

    def __init__(self, inbox: str, ttl_ms: int = INBOX_TTL_MS) -> None:
        self.inbox = inbox
        self.ttl_ms = ttl_ms
        self._expires = 0.0  # monotonic s; 0: unknown (renew before the next request)

    def renewal_command(self, budget_ms: float) -> tuple[str, str, int, str, int] | None:
        """The EVAL to send ahead of a request with ``budget_ms`` to live, when the inbox
        might expire before that request's reply could arrive; else None."""
        now = time.monotonic()
        if self._expires - now > (self.ttl_ms / 2 + budget_ms) / 1000:
            return None
        self._expires = now + self.ttl_ms / 1000
        return ("EVAL", keepalive_source(), 1, self.inbox, self.ttl_ms)

    def renewal(self, budget_ms: float) -> bytes | None:
        """:meth:`renewal_command`, packed in RESP."""
        command = self.renewal_command(budget_ms)
        return None if command is None else resp.pack(*command)

    def forget(self) -> None:
        """The last renewal may not have reached Redis: renew with the next request."""
        self._expires = 0.0
