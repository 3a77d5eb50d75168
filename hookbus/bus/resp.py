"""A tiny synchronous RESP2 client over one socket, for processes that start per event.

An agent CLI starts ``hookbus claude-code hook`` (and its peers) once per lifecycle event,
so everything that process imports is paid on every tool call: redis-py alone costs
110-220 ms to import here (``shared/FACTS.md``), against about 5 ms for ``socket``. This
client does the little such a process needs (connect, AUTH, SELECT, pipelined commands,
a read bounded by a deadline) and nothing else: no pool, no retry, no RESP3.

Errors are the bus's own: :class:`RedisUnavailable` when the server cannot be reached or
the connection breaks, :class:`RespTimeout` when a reply does not come by the deadline (the
connection is then closed: a late reply must never be read as the answer to a later
command, ``shared/FACTS.md``), and :class:`RedisCommandError` when Redis answers an error.
"""

from __future__ import annotations

import _socket  # the C module: socket.py's selectors/enum/array cost ~2.5 ms per process
import os
import time

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


def pack(*args: bytes | str | int | float) -> bytes:
    """One command in RESP2: an array of bulk strings."""
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


class Address:
    """Where and how to connect, parsed from a ``redis://``, ``rediss://`` or ``unix://``
    URL (the same forms :func:`hookbus.bus.connection.check_url` accepts)."""

    __slots__ = ("db", "host", "password", "path", "port", "tls", "username")

    def __init__(self, url: str) -> None:
        # parsed by hand: urllib.parse is not otherwise loaded by an adapter process
        scheme, sep, rest = url.partition("://")
        if not sep or scheme not in ("redis", "rediss", "unix"):
            raise RedisUnavailable(
                url, "unsupported URL scheme; use redis://, rediss:// or unix:///path"
            )
        rest, _, query = rest.partition("?")
        params = dict(pair.partition("=")[::2] for pair in query.split("&") if pair)
        self.tls = scheme == "rediss"
        netloc, _, path = rest.partition("/")
        if scheme == "unix":
            netloc, path = "", rest
        userinfo, at, hostport = netloc.rpartition("@")
        user, colon, password = userinfo.partition(":")
        self.username = _unquote(user) if at and user else None
        self.password = _unquote(password) if at and colon else None
        self.path: str | None = path if scheme == "unix" else None
        if hostport.startswith("["):
            host, _, port = hostport[1:].partition("]")
            port = port.lstrip(":")
        else:
            host, _, port = hostport.partition(":")
        self.host = host or "127.0.0.1"
        if port and not port.isdigit():
            raise RedisUnavailable(url, f"port {port!r} is not a number")
        self.port = int(port) if port else 6379
        db = params.get("db") or (path.strip("/") if scheme != "unix" else "") or "0"
        if not db.isdigit():
            raise RedisUnavailable(url, f"database {db!r} is not a number")
        self.db = int(db)


def _unquote(text: str) -> str:
    if "%" not in text:
        return text
    from urllib.parse import unquote

    return unquote(text)


TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs ~2 ms per process
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

    def __init__(self, url: str, *, connect_timeout_s: float = CONNECT_TIMEOUT_S) -> None:
        self.url = url
        self.address = Address(url)
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
        setup: list[tuple[bytes | str | int | float, ...]] = []
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
        if self.address.password is None:
            return self.url
        return self.url.replace(f":{self.address.password}@", ":***@")

    # --- commands ---------------------------------------------------------------------

    def call(self, *args: bytes | str | int | float, deadline: float | None = None) -> Reply:
        """Send one command and return its reply; an error reply raises
        :class:`RedisCommandError`. ``deadline`` is a ``time.monotonic()`` instant."""
        (reply,) = self.pipeline([args], deadline=deadline)
        if isinstance(reply, RedisCommandError):
            raise reply
        return reply

    def pipeline(
        self,
        commands: list[tuple[bytes | str | int | float, ...]],
        *,
        deadline: float | None = None,
    ) -> list[Reply]:
        """Send ``commands`` in one write and read one reply each (errors as values)."""
        self.connect(deadline)
        sock = self._sock
        assert sock is not None
        try:
            sock.settimeout(self._left(deadline))
            sock.sendall(b"".join(pack(*command) for command in commands))
            return [self._read(deadline) for _ in commands]
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
            return RedisCommandError(f"Redis refused a command: {rest.decode(errors='replace')}")
        raise RedisUnavailable(self._masked(), f"not a RESP2 reply: {line[:40]!r}")


def fresh_hex_id() -> str:
    """A uuid4 in hex, from ``os.urandom`` (``import uuid`` costs ~3 ms per process)."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    return raw.hex()
