"""The RESP wire format and Redis URLs, shared by every connection hookbus drives itself.

The one place commands are packed by hand: the per-event hook's socket
(:mod:`~hookbus.bus.resp.client`, over a cluster :mod:`~hookbus.bus.resp.cluster`), the chain
worker's replies and ack flushes, the producers' request XADDs and inbox reads all pack
here: several times cheaper than redis-py's general packer on those paths, and one encoder,
so an argument count can never disagree with the arguments that follow it. Hot paths pack
their constant parts once (:func:`head`, :func:`bulk`, :func:`prefix`) and join the
per-call parts to them.

Redis URLs are parsed by hand (``urllib.parse`` is not otherwise loaded by a per-event hook
process), in the forms :func:`hookbus.bus.connection.check_url` accepts: ``redis://``,
``rediss://`` (TLS), ``unix:///path`` and a Redis Cluster's ``redis+cluster://`` /
``rediss+cluster://`` (one seed node; the client finds the others); :func:`mask_url` is how
every message prints one.

Standard library only, and one module with the client's own: each module a per-event
process loads costs it about 0.1 ms.
"""

from __future__ import annotations

from hookbus.errors import RedisUnavailable

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: the per-event path does not import typing
if TYPE_CHECKING:
    from hookbus.bus.resp.client import (
        CONNECT_TIMEOUT_S,
        ReplyError,
        RespConnection,
        RespTimeout,
    )
    from hookbus.bus.resp.cluster import ClusterConnection

__all__ = [
    "CLUSTER_SCHEMES",
    "CONNECT_TIMEOUT_S",
    "EXEC",
    "MULTI",
    "PLAIN_SCHEMES",
    "Address",
    "Arg",
    "ReplyError",
    "RespConnection",
    "RespTimeout",
    "bulk",
    "connect",
    "head",
    "is_cluster",
    "mask_url",
    "pack",
    "prefix",
    "split_hostport",
]

# --- encoding -------------------------------------------------------------------------

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


# --- URLs -----------------------------------------------------------------------------

#: Schemes of a single server and of a Redis Cluster.
PLAIN_SCHEMES = ("redis", "rediss", "unix")
CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
DEFAULT_PORT = 6379


def mask_url(url: str) -> str:
    """``redis://user:secret@host`` -> ``redis://user:***@host``: every URL a message,
    a log line or ``hookbus config show`` prints goes through here."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    netloc, tail = rest[:cut], rest[cut:]
    userinfo, at, hostport = netloc.rpartition("@")
    if not at:
        return url
    user, colon, _ = userinfo.partition(":")
    if not colon:
        return url
    return f"{scheme}://{user}:***@{hostport}{tail}"


def is_cluster(url: str) -> bool:
    """Whether ``url`` names a Redis Cluster."""
    return url.partition("://")[0] in CLUSTER_SCHEMES


class Address:
    """Where and how to connect, parsed from a Redis URL."""

    __slots__ = ("cluster", "db", "host", "password", "path", "port", "tls", "username")

    def __init__(self, url: str) -> None:
        scheme, sep, rest = url.partition("://")
        if not sep or scheme not in PLAIN_SCHEMES + CLUSTER_SCHEMES:
            raise RedisUnavailable(
                mask_url(url),
                "unsupported URL scheme; use redis://, rediss://, unix:///path, "
                "or redis+cluster:// (rediss+cluster://) for a Redis Cluster",
            )
        self.cluster = scheme in CLUSTER_SCHEMES
        rest, _, query = rest.partition("?")
        params = dict(pair.partition("=")[::2] for pair in query.split("&") if pair)
        self.tls = scheme.startswith("rediss")
        netloc, _, path = rest.partition("/")
        if scheme == "unix":
            netloc, path = "", rest
        userinfo, at, hostport = netloc.rpartition("@")
        user, colon, password = userinfo.partition(":")
        self.username = _unquote(user) if at and user else None
        self.password = _unquote(password) if at and colon else None
        self.path: str | None = path if scheme == "unix" else None
        self.host, self.port = split_hostport(hostport, url)
        db = params.get("db") or (path.strip("/") if scheme != "unix" else "") or "0"
        if not db.isdigit():
            raise RedisUnavailable(mask_url(url), f"database {db!r} is not a number")
        self.db = 0 if self.cluster else int(db)

    def node(self, host: str, port: int) -> Address:
        """The same credentials and TLS, another node (a cluster's master)."""
        other = object.__new__(Address)
        for name in Address.__slots__:
            setattr(other, name, getattr(self, name))
        other.host, other.port, other.db, other.path = host, port, 0, None
        return other

    def url(self, masked: bool = True) -> str:
        """This node as a plain URL (the password masked unless asked for)."""
        if self.path is not None:
            return f"unix://{self.path}"
        auth = ""
        if self.password is not None:
            auth = f"{self.username or ''}:{'***' if masked else self.password}@"
        elif self.username:
            auth = f"{self.username}@"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'rediss' if self.tls else 'redis'}://{auth}{host}:{self.port}/{self.db}"


def split_hostport(hostport: str, url: str = "") -> tuple[str, int]:
    """``host:port`` (``[v6]:port``) as its parts, the defaults filled in."""
    if hostport.startswith("["):
        host, _, port = hostport[1:].partition("]")
        port = port.lstrip(":")
    else:
        host, _, port = hostport.partition(":")
    if port and not port.isdigit():
        raise RedisUnavailable(mask_url(url or hostport), f"port {port!r} is not a number")
    return host or "127.0.0.1", int(port) if port else DEFAULT_PORT


def _unquote(text: str) -> str:
    if "%" not in text:
        return text
    from urllib.parse import unquote

    return unquote(text)


# --- connections ----------------------------------------------------------------------


def connect(
    url: str, *, connect_timeout_s: float | None = None
) -> RespConnection | ClusterConnection:
    """A lean connection for ``url``: one socket, or routed over a cluster's masters."""
    from hookbus.bus.resp.client import CONNECT_TIMEOUT_S

    timeout = CONNECT_TIMEOUT_S if connect_timeout_s is None else connect_timeout_s
    if is_cluster(url):
        from hookbus.bus.resp.cluster import ClusterConnection

        return ClusterConnection(url, connect_timeout_s=timeout)
    from hookbus.bus.resp.client import RespConnection

    return RespConnection(url, connect_timeout_s=timeout)


_CLIENT_NAMES = ("CONNECT_TIMEOUT_S", "ReplyError", "RespConnection", "RespTimeout")


def __getattr__(name: str) -> object:
    # the client's names, importable from here, loaded when first asked for
    if name in _CLIENT_NAMES:
        from hookbus.bus.resp import client

        return getattr(client, name)
    raise AttributeError(f"module 'hookbus.bus.resp' has no attribute {name!r}")
