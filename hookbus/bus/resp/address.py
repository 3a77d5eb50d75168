"""Redis URLs as the lean client reads them, and how every message prints one.

Parsed by hand: ``urllib.parse`` is not otherwise loaded by a per-event hook process. The
forms are those :func:`hookbus.bus.connection.check_url` accepts: ``redis://``,
``rediss://`` (TLS), ``unix:///path`` and a Redis Cluster's ``redis+cluster://`` /
``rediss+cluster://`` (one seed node; the client finds the others).
"""

from __future__ import annotations

from hookbus.errors import RedisUnavailable

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
