"""Redis connections: one pool per process and URL, one retry policy, one error boundary.

Every redis-py error is translated into a :mod:`hookbus.errors` type here, with ``raise ...
from``, so callers above ``bus`` never import redis exceptions. The tenacity policy wraps only
idempotent I/O (reads, PING, SET of a stamp); a non-idempotent write (XADD of an event) is
tried once and its failure reported, because a blind retry could publish an event twice.

Redis Cluster (``redis+cluster://host:port``, ``rediss+cluster://`` for TLS): every hookbus key
of a namespace partition shares one hash slot (``{ns}`` or ``{ns:p}``, see
:mod:`hookbus.bus.keys`), so the bus talks to a cluster through plain connections to the
master that serves that slot (:func:`connect` with ``slot_key``, :func:`bus_client`,
:func:`partition_client`): scripts, pipelines, raw hand-packed connections and pub/sub work
there exactly as on a single server. Those connections follow a failover or a resharding:
each takes its address from its slot's route when it connects, and the route moves on a
connection error or a ``MOVED`` answer (:mod:`hookbus.bus.cluster_routes`). redis-py's
:class:`~redis.cluster.RedisCluster` (:func:`connect_cluster`) finds the masters and serves
cross-node views. RQ does not support Cluster: its jobs go to ``rq.redis_url``, which must
be a plain Redis.
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

from hookbus.bus import cluster_routes, keys
from hookbus.bus.settings.loader import mask_url
from hookbus.errors import ConfigError, RedisCommandError, RedisUnavailable, RedisWritesRefused

if TYPE_CHECKING:
    import redis.asyncio
    import redis.cluster

    from hookbus.bus.settings.loader import Settings

_T = TypeVar("_T")

#: Schemes of a Redis Cluster bus (hookbus's own; redis-py is given redis:// / rediss://).
CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
#: Schemes redis-py understands and hookbus supports.
SUPPORTED_SCHEMES = ("redis", "rediss", "unix", *CLUSTER_SCHEMES)
#: How long a new TCP connection may take before Redis counts as unreachable, in seconds.
CONNECT_TIMEOUT_S = 2.0
#: First backoff step of the retry policy, in seconds (doubled each try, with jitter).
RETRY_INITIAL_S = 0.05
#: Cap of one backoff step, in seconds.
RETRY_MAX_WAIT_S = 2.0
#: Total time the retry policy keeps trying, in seconds.
RETRY_BUDGET_S = 10.0

#: Pools by plain URL, or by (cluster URL, hash slot) for a slot's routed connections.
_pools: dict[str | tuple[str, int], redis.ConnectionPool] = {}
_pools_lock = threading.Lock()
_clusters: dict[str, redis.cluster.RedisCluster] = {}

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
            "rediss:// for TLS, unix:///path/to/socket, or redis+cluster://host:port "
            "(rediss+cluster://) for a Redis Cluster"
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


def is_cluster_url(url: str) -> bool:
    """Whether ``url`` names a Redis Cluster (``redis+cluster://``, ``rediss+cluster://``)."""
    return urlsplit(url).scheme in CLUSTER_SCHEMES


def connect(url: str, *, slot_key: str | None = None) -> redis.Redis:
    """A client on this process's shared pool for ``url`` (bytes responses, RESP2).

    RESP2 is pinned because redis-py 8 speaks RESP3 by default and stream replies change
    shape under it; the whole code base reads the RESP2 shapes. For a cluster URL the
    client is a plain one on the master serving ``slot_key``'s hash slot, through
    connections that follow that slot's route (a failover moves them); without a
    ``slot_key`` a cluster URL is refused with a :class:`ConfigError` (the caller would not
    know which node it talks to; RQ, which does not support Cluster, ends up here).
    """
    check_url(url)
    if not is_cluster_url(url):
        with _pools_lock:
            pool = _pools.get(url)
            if pool is None:
                pool = redis.ConnectionPool.from_url(url, protocol=2, **_pool_kwargs(url))
                _pools[url] = pool
        return redis.Redis(connection_pool=pool)
    if slot_key is None:
        raise ConfigError(
            f"{mask_url(url)} is a Redis Cluster URL, which this connection cannot use "
            "(it names no hash slot). RQ does not support Redis Cluster: with a cluster "
            "bus, point rq.redis_url (HOOKBUS_RQ__REDIS_URL) at a plain Redis "
            "(redis://host:port/db)"
        )
    route = slot_route(url, slot_key)
    with _pools_lock:
        pool = _pools.get((url, route.slot))
        if pool is None:
            node = route.url
            pool = redis.ConnectionPool.from_url(
                node, protocol=2, **_pool_kwargs(node), **routed_kwargs(url, slot_key)
            )
            _pools[(url, route.slot)] = pool
    return redis.Redis(connection_pool=pool)


def slot_route(url: str, slot_key: str) -> cluster_routes.SlotRoute:
    """The route of ``slot_key``'s hash slot on the cluster at ``url`` (read on first use)."""
    from redis.crc import key_slot

    slot = int(key_slot(slot_key.encode()))
    with translated(url):
        return cluster_routes.cluster_map(url, _plain_scheme(url)).route(slot)


def routed_kwargs(url: str, slot_key: str, *, asyncio: bool = False) -> dict[str, Any]:
    """Connection-pool options that make every connection follow ``slot_key``'s route on
    the cluster at ``url`` (redis-py sync, or redis.asyncio); none for a plain server."""
    if not is_cluster_url(url):
        return {}
    tls = urlsplit(url).scheme.startswith("rediss")
    if asyncio:
        connection_class = cluster_routes.async_connection_class(tls)
    else:
        connection_class = (
            cluster_routes.RoutedSSLConnection if tls else cluster_routes.RoutedConnection
        )
    return {"connection_class": connection_class, "route": slot_route(url, slot_key)}


def close_pools() -> None:
    """Disconnect every pooled connection of this process (tests, shutdown)."""
    with _pools_lock:
        for pool in _pools.values():
            pool.disconnect()
        _pools.clear()
        for cluster in _clusters.values():
            cluster.close()
        _clusters.clear()
    cluster_routes.forget_maps()


def connect_cluster(url: str) -> redis.cluster.RedisCluster:
    """redis-py's cluster client for a ``redis+cluster://`` URL (one per process and URL):
    cross-node views (the masters, every partition) and slot routing."""
    import redis.cluster

    check_url(url)
    if not is_cluster_url(url):
        raise ConfigError(f"{mask_url(url)} is not a redis+cluster:// URL")
    with _pools_lock:
        cluster = _clusters.get(url)
        if cluster is None:
            cluster = redis.cluster.RedisCluster.from_url(
                _plain_scheme(url), protocol=2, socket_connect_timeout=CONNECT_TIMEOUT_S
            )
            _clusters[url] = cluster
    return cluster


def node_url(url: str, slot_key: str) -> str:
    """The plain URL (credentials and TLS kept) of the master serving ``slot_key`` now."""
    return slot_route(url, slot_key).url


def master_urls(url: str) -> list[str]:
    """The plain URLs of every master of a cluster (``[url]`` for a single server)."""
    if not is_cluster_url(url):
        return [url]
    parts = urlsplit(_plain_scheme(url))
    auth = parts.netloc.rpartition("@")[0]
    out = []
    for node in connect_cluster(url).get_primaries():  # type: ignore[no-untyped-call]
        netloc = f"{auth}@{node.host}:{node.port}" if auth else f"{node.host}:{node.port}"
        out.append(parts._replace(netloc=netloc, path="/0").geturl())
    return out


def check_rq_url(settings: Settings) -> None:
    """Refuse, before any worker starts, an RQ URL that names a Redis Cluster (RQ does not
    support Cluster; a cluster bus with no ``rq.redis_url`` falls back to the bus URL)."""
    url = settings.effective_rq_redis_url
    if is_cluster_url(url):
        where = "rq.redis_url" if settings.rq.redis_url else "the bus URL (no rq.redis_url set)"
        raise ConfigError(
            f"the RQ Redis is {where}, {mask_url(url)}, a Redis Cluster: RQ does not support "
            "Redis Cluster. Keep the streams on the cluster and give RQ a plain Redis: "
            "rq.redis_url / HOOKBUS_RQ__REDIS_URL=redis://host:port/db"
        )


def bus_client(settings: Settings) -> redis.Redis:
    """The client for a namespace's own keys (heartbeats, bundles, reload, partition 0's
    streams): on a cluster, the master of the slot ``{ns}``."""
    return connect(settings.effective_redis_url, slot_key=keys.workers(settings.namespace))


def partition_client(settings: Settings, partition: int) -> redis.Redis:
    """The client for one partition's streams: on a cluster, the master of ``{ns:p}``."""
    slot_key = keys.Keys.for_partition(settings.namespace, partition).requests
    return connect(settings.effective_redis_url, slot_key=slot_key)


def _plain_scheme(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    return scheme.removesuffix("+cluster") + sep + rest


def client_url(client: redis.Redis | redis.asyncio.Redis) -> str:
    """A printable (password-masked) URL of a client, for error messages."""
    kwargs = client.connection_pool.connection_kwargs
    if "path" in kwargs:
        return f"unix://{kwargs['path']}"
    scheme = "rediss" if kwargs.get("ssl") else "redis"
    return f"{scheme}://{kwargs.get('host', '?')}:{kwargs.get('port', '?')}/{kwargs.get('db', 0)}"


#: Error prefixes with which Redis refuses every write, and what each means for an operator.
WRITE_REFUSALS = {
    "OOM": "OOM, out of memory (maxmemory reached under noeviction): free memory, raise "
    "maxmemory or trim streams",
    "MISCONF": "MISCONF, its last RDB save failed (a full or broken disk?) and "
    "stop-writes-on-bgsave-error is on: fix the disk, then BGSAVE",
    "READONLY": "READONLY, the node is a replica: point the URL at the master",
}


def write_refusal(error: BaseException | str) -> tuple[str, str] | None:
    """``(code, what it means)`` when ``error`` is Redis refusing writes (OOM, MISCONF,
    READONLY), else None. redis-py strips the codes it knows from the message and keeps
    them as ``status_code``; raw RESP errors keep theirs in front."""
    code = getattr(error, "status_code", None) or str(error).split(" ", 1)[0]
    meaning = WRITE_REFUSALS.get(str(code))
    return None if meaning is None else (str(code), meaning)


#: The key a write probe sends to: ``XADD <key> NOMKSTREAM`` never creates it, so a probe
#: writes nothing, yet Redis refuses it exactly when it refuses writes (see
#: :func:`probe_command`). An inbox name, so a producer's Redis user may send it.
WRITE_PROBE_ID = "write-probe"


def probe_command(probe_key: str) -> tuple[str, ...]:
    """A command Redis refuses when it refuses writes, and that otherwise does nothing
    (``XADD`` to a key that does not exist, with ``NOMKSTREAM``): one line in a round trip
    that says why nothing can be sent, so a degraded answer names it."""
    return ("XADD", probe_key, "NOMKSTREAM", "*", "p", "1")


def probe_writes(client: redis.Redis, probe_key: str) -> RedisWritesRefused | None:
    """The refusal Redis answers a write with now, or None when it takes writes."""
    try:
        client.execute_command(*probe_command(probe_key))  # type: ignore[no-untyped-call]
    except redis.exceptions.ResponseError as exc:
        refusal = write_refusal(exc)
        if refusal is not None:
            return RedisWritesRefused(client_url(client), *refusal)
    return None


def translate_error(exc: BaseException, url: str) -> Exception:
    """The hookbus error for a redis-py error raised while talking to ``url``."""
    if isinstance(exc, redis.exceptions.AuthenticationError | redis.exceptions.AuthorizationError):
        return RedisUnavailable(mask_url(url), f"authentication failed ({exc})")
    refusal = write_refusal(exc) if isinstance(exc, redis.exceptions.ResponseError) else None
    if refusal is not None:
        return RedisWritesRefused(mask_url(url), *refusal)
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
