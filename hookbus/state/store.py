"""Fleet-wide state in Redis: sliding-window limits, locks and escalation counters.

Every check is one Lua script on the master that holds its key (each piece of state has a
hash slot of its own, see :func:`hookbus.bus.keys.state`), so it is atomic whatever the number
of workers, and a cluster spreads the state over its masters. Windows and lock ages are
measured on Redis's clock (``TIME`` inside the script), never on a worker's.

Each call is bounded: it may take at most the time the request has left, and never more
than :data:`STATE_IO_TIMEOUT_S`; a Redis that does not answer in time, or refuses, raises
:class:`~hookbus.errors.FleetStateError`, which a hook turns into its failure (its
``on_error`` decides). Nothing here ever answers "allowed" for a check it could not make.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hookbus.bus import keys, lua
from hookbus.errors import FleetStateError
from hookbus.state.sessions import lock_owner

if TYPE_CHECKING:
    import redis

    from hookbus.bus.settings import Settings

#: Longest one state check may wait for Redis, in seconds, whatever the request has left.
STATE_IO_TIMEOUT_S = 0.5
#: A check given less time than this is not attempted (it could not complete), in seconds.
STATE_MIN_TIME_S = 0.002
#: Largest count an escalation window keeps (denies beyond it are not counted further).
ESCALATE_MAX_COUNT = 1_000_000


@dataclass(frozen=True)
class LimitCheck:
    """What a limit said about one request: allowed or not, how many requests are in the
    window (this one included when allowed) and in how many ms the oldest leaves it."""

    state_id: str
    allowed: bool
    count: int
    max: int
    window_ms: int
    frees_in_ms: int


@dataclass(frozen=True)
class LockHolder:
    """Who holds a lock: the session and agent that took it, and when (Redis ms)."""

    session: str
    agent: str
    since_ms: int

    @classmethod
    def parse(cls, value: bytes | str) -> LockHolder:
        text = value.decode() if isinstance(value, bytes) else value
        session, _, rest = text.partition("\n")
        agent, _, since = rest.partition("\n")
        return cls(session=session, agent=agent, since_ms=int(since or 0))


@dataclass(frozen=True)
class LockCheck:
    """What taking a lock said: granted (to this session, now or before) or held by another,
    with the holder and how long it may still hold it (ms; -1 when unknown)."""

    state_id: str
    granted: bool
    holder: LockHolder
    ttl_left_ms: int
    #: granted by this call (not held by the session already)
    taken_now: bool = False


@dataclass(frozen=True)
class StateEntry:
    """One piece of fleet state as ``hookbus state list/show`` shows it."""

    state_id: str
    kind: str
    count: int | None = None
    holder: LockHolder | None = None
    ttl_ms: int = -1

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.state_id, "kind": self.kind, "ttl_ms": self.ttl_ms}
        if self.count is not None:
            out["count"] = self.count
        if self.holder is not None:
            out["holder"] = {
                "session": self.holder.session,
                "agent": self.holder.agent,
                "since_ms": self.holder.since_ms,
            }
        return out


def limit_id(hook: str, key: str) -> str:
    """The state id of a limit's window: per hook, so two hooks never share a budget."""
    return f"limit:{hook}:{key}"


def lock_id(key: str, *, shadow: bool = False) -> str:
    """The state id of a lock: shared by every hook naming the same key (so two hooks can
    guard one resource); a shadow hook's locks are its own, so a trial never blocks anyone."""
    return f"{'shadow-lock' if shadow else 'lock'}:{key}"


def escalate_id(hook: str, subject: str) -> str:
    """The state id of an escalation counter (per hook, per agent or owned session:
    ``AGENT/SESSION``)."""
    return f"escalate:{hook}:{subject}"


def _script(name: str) -> tuple[str, str]:
    found = lua.script("hookbus.state", name)
    return found.text, found.sha


class FleetState:
    """The fleet's shared state on one Redis (or cluster) and namespace.

    Cheap to build: no connection is made until the first check. One instance per worker
    process; it is safe to use from several threads.
    """

    def __init__(self, url: str, namespace: str) -> None:
        self.url = url
        self.namespace = namespace
        self._scripts: dict[str, tuple[str, str]] = {}
        self._pools: dict[str, redis.ConnectionPool] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> FleetState:
        return cls(settings.effective_redis_url, settings.namespace)

    # --- the checks ---------------------------------------------------------------------

    def check_limit(
        self, state_id: str, member: str, *, max_count: int, window_ms: int, time_left_s: float
    ) -> LimitCheck:
        """Count ``member`` (a request id) in the window if fewer than ``max_count`` are."""
        reply = self._eval(
            "limit.lua", state_id, [window_ms, max_count, member], time_left_s=time_left_s
        )
        allowed, count, frees = (int(x) for x in reply)
        return LimitCheck(state_id, bool(allowed), count, max_count, window_ms, max(frees, 0))

    def count(self, state_id: str, member: str, *, window_ms: int, time_left_s: float) -> int:
        """Add ``member`` to a window and return how many it holds (escalation counters)."""
        check = self.check_limit(
            state_id,
            member,
            max_count=ESCALATE_MAX_COUNT,
            window_ms=window_ms,
            time_left_s=time_left_s,
        )
        return check.count

    def take_lock(
        self, state_id: str, *, session: str, agent: str, ttl_ms: int, time_left_s: float
    ) -> LockCheck:
        """Take the lock for ``agent``'s ``session``, or learn who holds it (the same
        session id of another agent is another session)."""
        session, agent = lock_owner(agent, session)
        reply = self._eval("lock.lua", state_id, [session, agent, ttl_ms], time_left_s=time_left_s)
        granted = bool(int(reply[0]))
        holder = LockHolder.parse(reply[1])
        ttl_left = int(reply[2])
        taken_now = granted and len(reply) > 3 and int(reply[3]) == 1
        return LockCheck(state_id, granted, holder, ttl_left, taken_now)

    def release_lock(self, state_id: str, *, session: str, agent: str, time_left_s: float) -> bool:
        """Release the lock if ``agent``'s ``session`` holds it; True when released."""
        session, agent = lock_owner(agent, session)
        released = self._eval("release.lua", state_id, [session, agent], time_left_s=time_left_s)
        return bool(int(released))

    def judge_take(
        self, digest: str, claim_ms: int, *, time_left_s: float
    ) -> tuple[str, str | None]:
        """A judge hook's shared verdict for ``digest``: ``("hit", verdict)``, ``("claimed",
        None)`` (this caller asks the model; the claim lapses after ``claim_ms``) or
        ``("busy", None)`` (another caller asks now)."""
        reply = self._eval(
            "judge.lua", f"judge:{digest}", ["take", claim_ms], time_left_s=time_left_s
        )
        code = int(reply[0])
        if code == 1:
            value = reply[1]
            return "hit", value.decode() if isinstance(value, bytes) else str(value)
        return ("claimed", None) if code == 0 else ("busy", None)

    def judge_put(self, digest: str, verdict: str, ttl_ms: int) -> None:
        """Share a verdict for ``ttl_ms`` (best effort: the caller has it either way)."""
        with contextlib.suppress(FleetStateError):
            self._eval(
                "judge.lua", f"judge:{digest}", ["put", verdict, max(ttl_ms, 1)], time_left_s=1.0
            )

    def judge_drop(self, digest: str) -> None:
        """End a claim whose call failed, so the next caller asks (best effort)."""
        with contextlib.suppress(FleetStateError):
            self._eval("judge.lua", f"judge:{digest}", ["drop"], time_left_s=1.0)

    # --- the operator's view ------------------------------------------------------------

    def entries(self) -> list[StateEntry]:
        """Every live piece of state of the namespace, on every master (SCAN, not KEYS)."""
        from hookbus.bus.connection import connect, master_urls, translated

        out: list[StateEntry] = []
        for url in master_urls(self.url):
            client = connect(url)
            with translated(url):
                for raw in client.scan_iter(match=keys.state_pattern(self.namespace), count=500):
                    key = raw.decode() if isinstance(raw, bytes) else str(raw)
                    state_id = keys.state_id_of(self.namespace, key)
                    if state_id is not None:
                        entry = self._read(client, state_id, key)
                        if entry is not None:
                            out.append(entry)
        return sorted(out, key=lambda e: e.state_id)

    def get(self, state_id: str) -> StateEntry | None:
        """One piece of state by id (None when absent or expired)."""
        from hookbus.bus.connection import translated

        key = keys.state(self.namespace, state_id)
        client = self._client(key)
        with translated(self.url):
            return self._read(client, state_id, key)

    def reset(self, state_id: str) -> bool:
        """Delete one piece of state (a stuck lock, a spent budget); True when it existed."""
        from hookbus.bus.connection import translated

        key = keys.state(self.namespace, state_id)
        client = self._client(key)
        with translated(self.url):
            return bool(client.delete(key))

    @staticmethod
    def _read(client: redis.Redis, state_id: str, key: str) -> StateEntry | None:
        kind = state_id.split(":", 1)[0]
        ttl = int(client.pttl(key))
        if ttl == -2:
            return None
        if kind == "judge":  # a judge hook's shared verdict (or the claim of one)
            return StateEntry(state_id, kind, ttl_ms=ttl)
        if kind in ("lock", "shadow-lock"):
            value = client.get(key)
            if value is None:
                return None
            return StateEntry(state_id, kind, holder=LockHolder.parse(value), ttl_ms=ttl)
        # entries past the window are pruned by the next check: the count may run ahead
        count = int(client.zcard(key))
        return StateEntry(state_id, kind, count=count, ttl_ms=ttl)

    # --- Redis --------------------------------------------------------------------------

    def _client(self, key: str) -> redis.Redis:
        """A client for the master of ``key`` on this object's own pools: their connections'
        timeouts are set per check, which must not leak into the process's shared pools."""
        import redis as redis_py

        from hookbus.bus.connection import is_cluster_url, no_handshake_kwargs, node_url

        url = node_url(self.url, key) if is_cluster_url(self.url) else self.url
        pool = self._pools.get(url)
        if pool is None:
            with self._lock:
                pool = self._pools.get(url)
                if pool is None:
                    pool = redis_py.ConnectionPool.from_url(
                        url,
                        protocol=2,
                        socket_timeout=STATE_IO_TIMEOUT_S,
                        socket_connect_timeout=STATE_IO_TIMEOUT_S,
                        **no_handshake_kwargs(),
                    )
                    self._pools[url] = pool
        return redis_py.Redis(connection_pool=pool)

    def close(self) -> None:
        """Disconnect this object's pools (a worker stopping, tests)."""
        with self._lock:
            for pool in self._pools.values():
                pool.disconnect()
            self._pools.clear()

    def _eval(self, script: str, state_id: str, args: list[Any], *, time_left_s: float) -> Any:
        """EVALSHA (EVAL once per connection after NOSCRIPT) on the key's master, bounded."""
        import redis.exceptions

        timeout = min(STATE_IO_TIMEOUT_S, time_left_s)
        if timeout < STATE_MIN_TIME_S:
            raise FleetStateError(state_id, "no time left before the request's deadline")
        source = self._scripts.get(script)
        if source is None:
            with self._lock:
                source = self._scripts.setdefault(script, _script(script))
        text, sha = source
        key = keys.state(self.namespace, state_id)
        try:
            client = self._client(key)
            return _bounded(client, timeout, ("EVALSHA", sha, 1, key, *args), ("EVAL", text))
        except FleetStateError:
            raise
        except (redis.exceptions.RedisError, OSError) as exc:
            started = "timed out" if isinstance(exc, redis.exceptions.TimeoutError) else "failed"
            raise FleetStateError(state_id, f"Redis {started}: {exc}") from exc
        except Exception as exc:  # a route that cannot be found (cluster reconfiguring)
            raise FleetStateError(state_id, f"{type(exc).__name__}: {exc}") from exc


def _bounded(
    client: redis.Redis, timeout_s: float, command: tuple[Any, ...], fallback: tuple[str, str]
) -> Any:
    """Send one command on a pooled connection whose reads may take at most ``timeout_s``.

    The connection is dropped after any failure (a read that timed out may have left a reply
    in flight). ``NOSCRIPT`` is answered by sending the script's text once (EVAL).
    """
    import redis.exceptions

    pool = client.connection_pool
    conn: Any = pool.get_connection()
    deadline = time.monotonic() + timeout_s
    try:
        conn.socket_timeout = timeout_s
        if conn._sock is None:
            conn.socket_connect_timeout = timeout_s
            conn.connect()
        _set_timeout(conn, timeout_s)
        conn.send_command(*command)
        try:
            return conn.read_response()
        except redis.exceptions.NoScriptError:
            left = deadline - time.monotonic()
            if left <= 0:
                raise redis.exceptions.TimeoutError("no time left to load the script") from None
            _set_timeout(conn, left)
            conn.send_command(fallback[0], fallback[1], *command[2:])
            return conn.read_response()
    except BaseException:
        conn.disconnect()
        raise
    finally:
        pool.release(conn)


def _set_timeout(conn: Any, timeout_s: float) -> None:
    """Bound the next reads of ``conn`` (a socket that cannot be bounded, as in tests with a
    fake server, keeps the pool's own timeout)."""
    settimeout = getattr(conn._sock, "settimeout", None)
    if settimeout is not None:
        settimeout(timeout_s)
