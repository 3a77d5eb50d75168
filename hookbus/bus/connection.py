"""Redis connections: one pool per process and URL, one retry policy, one error boundary.

Every redis-py error is translated into a :mod:`hookbus.errors` type here, with ``raise ...
from``, so callers above ``bus`` never import redis exceptions. The tenacity policy wraps only
idempotent I/O (reads, PING, SET of a stamp); a non-idempotent write (XADD of an event) is
tried once and its failure reported, because a blind retry could publish an event twice.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

import redis
import redis.exceptions
import tenacity

from hookbus.bus.settings import mask_url
from hookbus.errors import ConfigError, RedisCommandError, RedisUnavailable

if TYPE_CHECKING:
    import redis.asyncio

_T = TypeVar("_T")

#: Schemes redis-py understands and hookbus supports.
SUPPORTED_SCHEMES = ("redis", "rediss", "unix")
#: How long a new TCP connection may take before Redis counts as unreachable, in seconds.
CONNECT_TIMEOUT_S = 2.0
#: First backoff step of the retry policy, in seconds (doubled each try, with jitter).
RETRY_INITIAL_S = 0.05
#: Cap of one backoff step, in seconds.
RETRY_MAX_WAIT_S = 2.0
#: Total time the retry policy keeps trying, in seconds.
RETRY_BUDGET_S = 10.0

_pools: dict[str, redis.ConnectionPool] = {}
_pools_lock = threading.Lock()

#: redis-py errors that mean "the server is not there" (retryable) rather than "it said no".
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    ConnectionError,
    OSError,
)


def check_url(url: str) -> str:
    """Reject URLs redis-py would misread, with a message that shows a valid one."""
    scheme = urlsplit(url).scheme
    if scheme not in SUPPORTED_SCHEMES:
        raise ConfigError(
            f"unsupported Redis URL {mask_url(url)!r}: use redis://[user:password@]host:port/db, "
            "rediss:// for TLS, or unix:///path/to/socket"
        )
    return url


def _pool_kwargs(url: str) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "socket_connect_timeout": CONNECT_TIMEOUT_S,
        "health_check_interval": 30,
    }
    if not url.startswith("unix:"):
        kwargs["socket_keepalive"] = True  # unix socket connections reject the option
    return kwargs


def no_handshake_kwargs() -> dict[str, Any]:
    """Connection options that skip redis-py's ``CLIENT SETINFO`` on every new connection.

    The handshake costs two round trips per fresh connection and reads its replies with no
    timeout of its own: a request on a fresh connection to a stalled server would wait on
    it past any deadline. Producers' connections skip it (redis-py versions with a
    ``driver_info`` module spell this ``driver_info=None``, older ones ``lib_name=None,
    lib_version=None``).
    """
    try:
        import redis.driver_info  # noqa: F401
    except ImportError:
        return {"lib_name": None, "lib_version": None}
    return {"driver_info": None}


def connect(url: str) -> redis.Redis:
    """A client on this process's shared pool for ``url`` (bytes responses, RESP2).

    RESP2 is pinned because redis-py 8 speaks RESP3 by default and stream replies change
    shape under it; the whole code base reads the RESP2 shapes.
    """
    check_url(url)
    with _pools_lock:
        pool = _pools.get(url)
        if pool is None:
            pool = redis.ConnectionPool.from_url(url, protocol=2, **_pool_kwargs(url))
            _pools[url] = pool
    return redis.Redis(connection_pool=pool)


def close_pools() -> None:
    """Disconnect every pooled connection of this process (tests, shutdown)."""
    with _pools_lock:
        for pool in _pools.values():
            pool.disconnect()
        _pools.clear()


def client_url(client: redis.Redis | redis.asyncio.Redis) -> str:
    """A printable (password-masked) URL of a client, for error messages."""
    kwargs = client.connection_pool.connection_kwargs
    if "path" in kwargs:
        return f"unix://{kwargs['path']}"
    scheme = "rediss" if kwargs.get("ssl") else "redis"
    return f"{scheme}://{kwargs.get('host', '?')}:{kwargs.get('port', '?')}/{kwargs.get('db', 0)}"


def translate_error(exc: BaseException, url: str) -> Exception:
    """The hookbus error for a redis-py error raised while talking to ``url``."""
    if isinstance(exc, redis.exceptions.AuthenticationError | redis.exceptions.AuthorizationError):
        return RedisUnavailable(mask_url(url), f"authentication failed ({exc})")
    if isinstance(exc, CONNECTION_ERRORS):
        reason = str(exc) or type(exc).__name__
        return RedisUnavailable(mask_url(url), reason)
    if isinstance(exc, redis.exceptions.RedisError):
        return RedisCommandError(f"Redis at {mask_url(url)} refused a command: {exc}")
    return exc if isinstance(exc, Exception) else RuntimeError(str(exc))


@contextlib.contextmanager
def translated(url: str) -> Iterator[None]:
    """Translate redis-py errors raised in the block into hookbus errors."""
    try:
        yield
    except (redis.exceptions.RedisError, ConnectionError, OSError) as exc:
        raise translate_error(exc, url) from exc


def retry_policy(budget_s: float = RETRY_BUDGET_S) -> tenacity.Retrying:
    """The one retry policy: exponential backoff with jitter, capped, for connection errors."""
    return tenacity.Retrying(
        retry=tenacity.retry_if_exception_type(CONNECTION_ERRORS),
        wait=tenacity.wait_random_exponential(multiplier=RETRY_INITIAL_S, max=RETRY_MAX_WAIT_S),
        stop=tenacity.stop_after_delay(budget_s),
        reraise=True,
    )


def idempotent(
    client: redis.Redis, fn: Callable[[], _T], *, budget_s: float = RETRY_BUDGET_S
) -> _T:
    """Run idempotent Redis I/O under the retry policy; translate what still fails."""
    url = client_url(client)
    with translated(url):
        return retry_policy(budget_s)(fn)


def ping(url: str, *, budget_s: float = 0.0) -> None:
    """Raise :class:`RedisUnavailable` with one clear line unless ``url`` answers PING."""
    client = connect(url)
    with translated(url):
        if budget_s > 0:
            retry_policy(budget_s)(client.ping)
        else:
            client.ping()
