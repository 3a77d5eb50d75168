"""The sync client's request connections: every byte in and out bounded by the call's deadline.

Connections are taken and given back without touching the network (one is opened lazily by
its first command). Before each command the connection's connect timeout, its socket
timeout (which bounds the AUTH / SELECT handshake of a fresh connection) and the live
socket's timeout (which bounds the write) are set from the time the call has left, and
every reply is read with that time as its timeout. ``CLIENT SETINFO`` is skipped and
redis-py's built-in retry (seconds of backoff) is off: the deadline rules. So a request
returns by its deadline on a refused, reset, stalled or slow server, on a fresh or a warm
connection.

This module imports redis-py; the sync client imports it only when a client is built.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from typing import Any

import redis
import redis.exceptions
from redis.backoff import NoBackoff
from redis.retry import Retry

from hookbus.bus import ids, reqrep, resp
from hookbus.bus.connection import CONNECT_TIMEOUT_S, no_handshake_kwargs, translate_error
from hookbus.bus.keys import Keys
from hookbus.bus.resp import mask_url
from hookbus.errors import RedisCommandError, RedisUnavailable, RedisWritesRefused, RequestTimeout
from hookbus.producers.client_base import time_left
from hookbus.producers.inbox_ttl import InboxTTL

#: Errors of a connection that mean "the server is not there or broke the link".
IO_ERRORS: tuple[type[BaseException], ...] = (
    redis.exceptions.RedisError,
    ConnectionError,
    OSError,
)


#: Replies read from a connection's inbox between two XTRIMs of what was read.
INBOX_TRIM_EVERY = 100

log = logging.getLogger(__name__)
#: Set when Redis refused an inbox XTRIM (an ACL without it): no more trims are sent.
_trims_refused = False


class ConnectionInbox:
    """The reply inbox of one request connection: its key, expiry and read position.

    The sync client waits for each reply with ``XREAD BLOCK`` on an inbox stream of its
    connection (one request at a time per connection), so the worker answers with one
    ``XADD NOMKSTREAM`` (no ``PEXPIRE``, no list key created and deleted per request). The
    keepalive and a trim of what was read ride, when due, in the write of a request.
    """

    def __init__(self, key: str) -> None:
        self.key = key
        self.ttl = InboxTTL(key)
        # XREAD COUNT 1 BLOCK <ms> STREAMS <key> <last id>: constant parts packed once
        self._xread_head = resp.prefix(8, "XREAD", "COUNT", 1, "BLOCK")
        self._xread_key = resp.bulk("STREAMS") + resp.bulk(key)
        self.last_id: bytes = b"0-0"
        self.read_since_trim = 0

    def before_request(self, budget_ms: float) -> list[tuple[Any, ...]]:
        """The commands to send ahead of a request's XADD (often none)."""
        return self.ttl.renewal_commands(budget_ms)

    def after_request(self) -> list[tuple[Any, ...]]:
        """The trim of what was read, when due, to send behind the request's XREAD: it runs
        once the reply is in, and a refusal (a Redis user without XTRIM) does not fail the
        request (see :meth:`trim_refused`)."""
        if _trims_refused or self.read_since_trim < INBOX_TRIM_EVERY:
            return []
        self.read_since_trim = 0
        return [("XTRIM", self.key, "MINID", "~", self.last_id)]

    @staticmethod
    def trim_refused(error: BaseException) -> None:
        """Stop trimming (this process): the inboxes are then bounded by the workers'
        approximate MAXLEN only."""
        global _trims_refused
        if not _trims_refused:
            _trims_refused = True
            log.warning(
                "Redis refused XTRIM of a reply inbox (%s); inboxes are left to the workers' "
                "MAXLEN trimming (allow +xtrim to the producer's Redis user)",
                error,
            )

    def xread(self, block_s: int) -> bytes:
        """Wait for the next reply after the last one read (packed in RESP)."""
        bulk = resp.bulk
        return self._xread_head + bulk(block_s * 1000) + self._xread_key + bulk(self.last_id)

    def take(self, found: Any) -> dict[bytes, bytes] | None:
        """The fields of the entry an XREAD returned (None: nothing), moving past it."""
        if not found:
            return None
        entry_id, flat = found[0][1][0]
        self.last_id = entry_id
        self.read_since_trim += 1
        return dict(zip(flat[::2], flat[1::2], strict=False))


@dataclass(frozen=True, slots=True)
class Lane:
    """One partition as the sync client sees it: its keys (request and event streams, reply
    inboxes in the partition's hash slot), its request connections (on a cluster, to the
    master serving that slot) and the prefix of its connections' inboxes."""

    keys: Keys
    pool: RequestConnections
    inbox_prefix: str
    #: ``XADD <requests> * e``: every request's command up to its data, packed.
    xadd_head: bytes = b""

    @classmethod
    def make(cls, keys: Keys, pool: RequestConnections, inbox_prefix: str) -> Lane:
        # no MAXLEN: trimming is the chain workers' (only what they took; see trimmer)
        return cls(keys, pool, inbox_prefix, reqrep.request_xadd_head(keys.requests))


def inbox_of(conn: Any, prefix: str) -> ConnectionInbox:
    """``conn``'s inbox (made on first use, named ``prefix`` + a fresh id)."""
    inbox: ConnectionInbox | None = getattr(conn, "hookbus_inbox", None)
    if inbox is None:
        inbox = ConnectionInbox(prefix + ids.token(16))
        conn.hookbus_inbox = inbox
    return inbox


class RequestConnections:
    """Idle connections for requests, made like ``template``'s but bounded and never retried."""

    def __init__(self, template: redis.ConnectionPool, url: str) -> None:
        kwargs = dict(template.connection_kwargs)
        kwargs["health_check_interval"] = 0
        kwargs["retry"] = Retry(NoBackoff(), 0)
        kwargs.update(no_handshake_kwargs())
        self.url = url
        self._class = template.connection_class
        self._kwargs = kwargs
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def take(self) -> Any:
        """An idle connection, or a new unopened one."""
        with self._lock:
            if self._pid != os.getpid():  # forked: the parent's sockets are not ours
                self._idle, self._pid = [], os.getpid()
            if self._idle:
                return self._idle.pop()
        return self._class(**self._kwargs)

    def give_back(self, conn: Any) -> None:
        with self._lock:
            self._idle.append(conn)

    def disconnect(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.disconnect()

    def call(
        self, conn: Any, end: float, *commands: tuple[Any, ...] | bytes, optional: int = 0
    ) -> list[Any]:
        """Send ``commands`` in one write and read their replies, all before ``end``.

        The last ``optional`` commands may be refused: their error comes back in place of
        their reply instead of failing the call.

        On a timeout the connection is dropped (redis-py disconnects on read errors), so
        a reply still in flight cannot land on the next request of this connection.
        Raises :class:`RequestTimeout`, :class:`RedisUnavailable` or
        :class:`RedisCommandError`.
        """
        try:
            _bound(conn, time_left(end))
            conn.send_packed_command(
                [b"".join(_packed(command) for command in commands)],
                check_health=False,
            )
            replies: list[Any] = []
            required = len(commands) - optional
            for index in range(len(commands)):
                try:
                    replies.append(conn.read_response(timeout=time_left(end)))
                except redis.exceptions.ResponseError as exc:
                    if index >= required:
                        replies.append(exc)
                        continue
                    conn.disconnect()  # later replies of this batch are still unread
                    refused = translate_error(exc, self.url)
                    if isinstance(refused, RedisWritesRefused):  # OOM, MISCONF: say so
                        raise refused from exc
                    raise RedisCommandError(f"Redis refused a command: {exc}") from exc
            return replies
        except redis.exceptions.TimeoutError as exc:
            conn.disconnect()
            raise RequestTimeout("no reply before the deadline") from exc
        except RequestTimeout:
            conn.disconnect()
            raise
        except IO_ERRORS as exc:
            conn.disconnect()
            error = translate_error(exc, self.url)
            if isinstance(error, RedisUnavailable):
                raise error from exc
            raise RedisUnavailable(mask_url(self.url), str(exc)) from exc


def _packed(command: tuple[Any, ...] | bytes) -> bytes:
    """A command in RESP: packed already (hot-path commands), or packed here."""
    return command if type(command) is bytes else resp.pack(*command)


def _bound(conn: Any, left: float) -> None:
    """Make every wait of the next command on ``conn`` end within ``left`` seconds.

    A fresh connection takes its connect timeout and socket timeout from here (the socket
    timeout also bounds the handshake's reads); a warm one gets ``left`` on its socket, so
    a write into a full socket buffer cannot block past the deadline either.
    """
    conn.socket_connect_timeout = min(left, CONNECT_TIMEOUT_S)
    conn.socket_timeout = left
    settimeout = getattr(getattr(conn, "_sock", None), "settimeout", None)
    if settimeout is not None:  # a warm connection (fakeredis' sockets have no timeouts)
        settimeout(left)
