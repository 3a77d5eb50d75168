"""A tiny synchronous RESP2 client over one socket, for processes that start per event.

An agent CLI starts ``hookbus claude-code hook`` (and its peers) once per lifecycle event,
so everything that process imports is paid on every tool call, and redis-py costs far more
to import than ``socket`` (figures in docs/performance.md). This client does the little
such a process needs (connect, AUTH, SELECT, pipelined commands, a read bounded by a
deadline) and nothing else: no pool, no retry, no RESP3.

Errors are the bus's own: :class:`RedisUnavailable` when the server cannot be reached or
the connection breaks, :class:`RespTimeout` when a reply does not come by the deadline (the
connection is then closed: a late reply must never be read as the answer to a later
command), and :class:`RedisCommandError` when Redis answers an error.
"""

from __future__ import annotations

import _socket  # the C module: socket.py also imports selectors/enum/array, at every start
import time

from hookbus.bus.resp import Address, Arg, mask_url, pack
from hookbus.errors import RedisCommandError, RedisUnavailable

#: How long connecting may take before Redis counts as unreachable, in seconds.
CONNECT_TIMEOUT_S = 2.0
#: Bytes asked of the socket per recv.
RECV_BYTES = 65_536

Reply = bytes | int | None | list["Reply"] | RedisCommandError
"""A decoded RESP2 reply: bulk/simple strings as bytes, integers, nil, arrays; an error
reply is returned (not raised) inside pipelines so later replies stay in step."""


class RespTimeout(RedisUnavailable):
    """No complete reply arrived before the caller's deadline; the connection is closed."""


class ReplyError(RedisCommandError):
    """An error reply; ``text`` is Redis's own (``MOVED 866 127.0.0.1:7001``...)."""

    def __init__(self, text: str) -> None:
        super().__init__(f"Redis refused a command: {text}")
        self.text = text


TYPE_CHECKING = False  # not typing.TYPE_CHECKING: the per-event path does not import typing
if TYPE_CHECKING:
    import socket

    _Socket = _socket.socket | socket.socket


def _plain_connect(addr: Address, timeout: float) -> _socket.socket:
    """A connected TCP (TCP_NODELAY) or unix socket, from ``_socket`` alone."""
    if addr.path is not None:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(addr.path)
        except OSError:
            sock.close()
            raise
        return sock
    # an ASCII host goes as bytes: a str makes getaddrinfo load the idna codec
    host: str | bytes = addr.host.encode() if addr.host.isascii() else addr.host
    error: OSError | None = None
    for family, kind, proto, _, where in _socket.getaddrinfo(
        host, addr.port, 0, _socket.SOCK_STREAM
    ):
        sock = _socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            sock.connect(where)
        except OSError as exc:
            sock.close()
            error = exc
            continue
        sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
        return sock
    raise error or OSError(f"no address found for {addr.host}")


def _tls_connect(addr: Address, timeout: float) -> socket.socket:
    """A TLS connection (``rediss://``): only TLS users load ssl and socket."""
    import socket
    import ssl

    sock = socket.create_connection((addr.host, addr.port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return ssl.create_default_context().wrap_socket(sock, server_hostname=addr.host)


class RespConnection:
    """One connection to Redis. Not thread-safe; one per process (or per gateway worker
    thread) is the intended use."""

    def __init__(
        self,
        url: str,
        *,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        address: Address | None = None,
    ) -> None:
        self.url = url
        self.address = Address(url) if address is None else address
        self.connect_timeout_s = connect_timeout_s
        self._sock: _Socket | None = None
        self._buf = bytearray()
        self._pos = 0

    # --- connection -------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self._sock is not None

    def connect(self, deadline: float | None = None) -> None:
        """Open the socket (TCP_NODELAY), then AUTH and SELECT as the URL asks."""
        if self._sock is not None:
            return
        timeout = self.connect_timeout_s
        if deadline is not None:
            timeout = min(timeout, max(deadline - time.monotonic(), 0.001))
        addr = self.address
        try:
            sock = _tls_connect(addr, timeout) if addr.tls else _plain_connect(addr, timeout)
        except OSError as exc:
            raise RedisUnavailable(self._masked(), exc.strerror or str(exc)) from exc
        self._sock = sock
        self._buf.clear()
        self._pos = 0
        setup: list[tuple[Arg, ...]] = []
        if addr.password is not None:
            if addr.username:
                setup.append(("AUTH", addr.username, addr.password))
            else:
                setup.append(("AUTH", addr.password))
        if addr.db:
            setup.append(("SELECT", addr.db))
        if setup:
            for reply in self.pipeline(setup, deadline=deadline):
                if isinstance(reply, RedisCommandError):
                    self.close()
                    raise RedisUnavailable(self._masked(), f"connection setup refused: {reply}")

    def close(self) -> None:
        sock, self._sock = self._sock, None
        self._buf.clear()
        self._pos = 0
        if sock is not None:
            try:  # noqa: SIM105 - contextlib is one more import per adapter process
                sock.close()
            except OSError:  # pragma: no cover - closing a broken socket
                pass

    def __enter__(self) -> RespConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _masked(self) -> str:
        return mask_url(self.url)

    # --- commands ---------------------------------------------------------------------

    def call(
        self, *args: Arg, deadline: float | None = None, key: bytes | str | None = None
    ) -> Reply:
        """Send one command and return its reply; an error reply raises
        :class:`RedisCommandError`. ``deadline`` is a ``time.monotonic()`` instant; ``key``
        routes a command on a cluster (one server has nothing to route)."""
        (reply,) = self.pipeline([args], deadline=deadline)
        if isinstance(reply, RedisCommandError):
            raise reply
        return reply

    def pipeline(
        self,
        commands: list[tuple[Arg, ...]],
        *,
        deadline: float | None = None,
        key: bytes | str | None = None,
        until_error: bool = False,
    ) -> list[Reply]:
        """Send ``commands`` in one write and read one reply each (errors as values).

        ``until_error``: stop at the first error reply and close the connection (the
        replies left unread must never be taken for a later command's), so that a refused
        command is reported at once rather than after a blocking one behind it."""
        self.connect(deadline)
        sock = self._sock
        assert sock is not None
        try:
            sock.settimeout(self._left(deadline))
            sock.sendall(b"".join([pack(*command) for command in commands]))
            replies: list[Reply] = []
            for _ in commands:
                reply = self._read(deadline)
                replies.append(reply)
                if until_error and isinstance(reply, RedisCommandError):
                    if len(replies) < len(commands):
                        self.close()
                    break
            return replies
        except TimeoutError as exc:
            self.close()
            raise RespTimeout(self._masked(), "no reply before the deadline") from exc
        except RespTimeout:
            self.close()
            raise
        except OSError as exc:
            self.close()
            raise RedisUnavailable(self._masked(), exc.strerror or str(exc)) from exc

    # --- reading ----------------------------------------------------------------------

    def _left(self, deadline: float | None) -> float | None:
        if deadline is None:
            return None
        left = deadline - time.monotonic()
        if left <= 0:
            raise RespTimeout(self._masked(), "no reply before the deadline")
        return left

    def _fill(self, deadline: float | None) -> None:
        sock = self._sock
        assert sock is not None
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0
        sock.settimeout(self._left(deadline))
        chunk = sock.recv(RECV_BYTES)
        if not chunk:
            raise ConnectionResetError(0, "the server closed the connection")
        self._buf += chunk

    def _line(self, deadline: float | None) -> bytes:
        while True:
            end = self._buf.find(b"\r\n", self._pos)
            if end >= 0:
                line = bytes(self._buf[self._pos : end])
                self._pos = end + 2
                return line
            self._fill(deadline)

    def _exact(self, n: int, deadline: float | None) -> bytes:
        while len(self._buf) - self._pos < n + 2:
            self._fill(deadline)
        data = bytes(self._buf[self._pos : self._pos + n])
        self._pos += n + 2
        return data

    def _read(self, deadline: float | None) -> Reply:
        line = self._line(deadline)
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest
        if kind == b":":
            return int(rest)
        if kind == b"$":
            size = int(rest)
            return None if size < 0 else self._exact(size, deadline)
        if kind == b"*":
            count = int(rest)
            if count < 0:
                return None
            return [self._read(deadline) for _ in range(count)]
        if kind == b"-":
            return ReplyError(rest.decode(errors="replace"))
        raise RedisUnavailable(self._masked(), f"not a RESP2 reply: {line[:40]!r}")
