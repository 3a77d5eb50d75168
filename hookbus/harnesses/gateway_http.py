"""The gateway's HTTP edge: who is asking (per-agent tokens), how much and how fast they may
send, and how long they may take to send it.

Everything here runs before a request's JSON is parsed, so a client can cost the gateway only
what these limits allow:

* **Header timeout** (:class:`GuardedH11Protocol`): a connection whose request headers are
  not complete within :data:`HEADER_TIMEOUT_S` of its opening (or of the previous response,
  on a keep-alive connection) is closed: a client trickling header bytes (slowloris) holds a
  socket for seconds, not forever. The same protocol stamps each request's arrival (when its
  headers were complete), from which the request's deadline runs.
* **Body limits** (:func:`read_body`): a declared ``Content-Length`` over the limit is
  refused before any of the body is read; a chunked body is counted while it arrives and
  reading stops at the limit (uvicorn stops reading the socket while the application does
  not ask for more); the whole body must arrive within :data:`BODY_TIMEOUT_S`.
* **Tokens** (:class:`TokenTable`): per-agent bearer tokens from a file; the agent's identity
  is taken from the token, never from the body.
* **Rate** (:class:`RateLimiter`): a token bucket per identity.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import math
import os
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from hookbus.errors import ConfigError

if TYPE_CHECKING:
    from starlette.requests import Request

log = logging.getLogger(__name__)

#: Longest time from a connection's opening (or its previous response) to complete request
#: headers, in seconds.
HEADER_TIMEOUT_S = 5.0
#: Longest time to receive a whole request body, in seconds.
BODY_TIMEOUT_S = 10.0
#: Largest request body accepted, in bytes.
MAX_BODY_BYTES = 4 * 1024 * 1024
#: Longest hook-entry timeout (``?timeout=``) taken as given; larger values are clamped, s.
MAX_ENTRY_TIMEOUT_S = 600.0
#: Requests per second one identity may send on average, and the burst it may send at once.
DEFAULT_RATE_PER_S = 1000.0
DEFAULT_BURST = 2000
#: Key of the request's arrival time (``time.monotonic()``) in ``request.state``.
ARRIVAL_STATE = "hookbus_arrival"


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header timeout and an arrival stamp per request."""

    header_timeout_s = HEADER_TIMEOUT_S

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_timer: asyncio.TimerHandle | None = None
        self._seen_cycle: object = None
        self._arm_header_timer()

    def _arm_header_timer(self) -> None:
        self._cancel_header_timer()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_late)

    def _cancel_header_timer(self) -> None:
        timer = getattr(self, "_header_timer", None)
        if timer is not None:
            timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        cycle = self.cycle
        if cycle is not None and cycle is self._seen_cycle and not cycle.response_complete:
            return  # a request is being answered: its headers came in time
        if not self.transport.is_closing():
            log.info(
                "gateway: closed a connection whose request headers took over %.1f s",
                self.header_timeout_s,
            )
            self.transport.close()

    def handle_events(self) -> None:
        super().handle_events()
        cycle = self.cycle
        if cycle is not None and cycle is not self._seen_cycle:
            # headers complete: a new request started; the deadline runs from here
            self._seen_cycle = cycle
            self._cancel_header_timer()
            state = cycle.scope.get("state")
            if isinstance(state, dict):
                state[ARRIVAL_STATE] = time.monotonic()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # may already start a pipelined next request
        cycle = self.cycle
        waiting = cycle is None or (cycle is self._seen_cycle and cycle.response_complete)
        if waiting and not self.transport.is_closing():
            self._arm_header_timer()  # the next request on this connection gets its own

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)


class BodyTooLarge(Exception):
    """The body is over the limit; ``head`` holds what was read of it (for its event name)."""

    def __init__(self, size: int | None, head: bytes) -> None:
        super().__init__(size)
        self.size = size
        self.head = head


async def read_body(
    request: Request, *, max_bytes: int | None = None, timeout_s: float | None = None
) -> bytes:
    """The request's body, read within ``timeout_s`` (default :data:`BODY_TIMEOUT_S`) and
    never past ``max_bytes`` (default :data:`MAX_BODY_BYTES`): :class:`BodyTooLarge` (a
    declared length over the limit refuses after the first chunk, which is kept for the
    event's name), :class:`TimeoutError` when the body is too slow."""
    max_bytes = MAX_BODY_BYTES if max_bytes is None else max_bytes
    timeout_s = BODY_TIMEOUT_S if timeout_s is None else timeout_s
    declared = request.headers.get("content-length")
    size: int | None = None
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            size = None
    chunks: list[bytes] = []
    total = 0
    async with asyncio.timeout(timeout_s):
        async for chunk in request.stream():
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes or (size is not None and size > max_bytes):
                raise BodyTooLarge(size if size is not None else None, b"".join(chunks)[:65536])
    return b"".join(chunks)


def parse_timeout(raw: str | None, default_s: float) -> float:
    """The hook entry's timeout from ``?timeout=``: a finite number of seconds > 0, clamped
    to :data:`MAX_ENTRY_TIMEOUT_S`; :class:`ValueError` says what is wrong with anything
    else (``inf``, ``nan``, ``-1``, ``0``, words)."""
    if raw is None:
        return default_s
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"timeout must be a number of seconds, got {raw[:40]!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"timeout must be a finite number of seconds > 0, got {raw[:40]!r}")
    return min(value, MAX_ENTRY_TIMEOUT_S)


class TokenTable:
    """Bearer tokens and the identity each stands for.

    A tokens file has one ``AGENT_ID TOKEN`` pair per line (``#`` comments and blank lines
    allowed); each agent's requests are stamped with its id. A single shared token (no
    identity) comes from ``--token-file`` or ``$HOOKBUS_GATEWAY_TOKEN``.
    """

    def __init__(self, tokens: dict[str, str | None]) -> None:
        self._tokens = tokens  # token -> agent id (None: the shared token, no identity)

    @classmethod
    def shared(cls, token: str) -> TokenTable:
        return cls({token: None})

    @classmethod
    def from_file(cls, path: Path) -> TokenTable:
        """Read a tokens file; :class:`ConfigError` names the line at fault. A file other
        users may read is refused: it holds every agent's credential."""
        warn_if_readable_by_others(path, "tokens file", refuse=True)
        tokens: dict[str, str | None] = {}
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"tokens file {path}: cannot read it ({exc.strerror})") from exc
        for number, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) != 2 or len(parts[1]) < 16:
                raise ConfigError(
                    f"tokens file {path}, line {number}: expected 'AGENT_ID TOKEN' with a "
                    "token of 16 characters or more"
                )
            agent, token = parts
            if token in tokens:
                raise ConfigError(f"tokens file {path}, line {number}: a token used twice")
            tokens[token] = agent
        if not tokens:
            raise ConfigError(f"tokens file {path}: no 'AGENT_ID TOKEN' line")
        return cls(tokens)

    def pairs(self) -> list[tuple[str, str | None]]:
        """``(token, identity)`` of every token (None: the shared token)."""
        return list(self._tokens.items())

    def identify(self, request: Request) -> tuple[bool, str | None]:
        """(authorised, agent id) of a request's ``Authorization: Bearer`` token. Every
        known token is compared in constant time."""
        given = request.headers.get("authorization", "")
        scheme, _, value = given.partition(" ")
        value = value.strip()
        found: tuple[bool, str | None] = (False, None)
        for token, agent in self._tokens.items():
            if hmac.compare_digest(value.encode(), token.encode()) and scheme.lower() == "bearer":
                found = (True, agent)
        return found


def read_secret_file(path: Path, what: str) -> str:
    """A secret kept in a file (first line, stripped), warned about when others can read it."""
    warn_if_readable_by_others(path, what)
    try:
        secret = Path(path).read_text(encoding="utf-8").strip().splitlines()
    except OSError as exc:
        raise ConfigError(f"{what} {path}: cannot read it ({exc.strerror})") from exc
    if not secret or not secret[0].strip():
        raise ConfigError(f"{what} {path} is empty")
    return secret[0].strip()


def warn_if_readable_by_others(path: Path, what: str, *, refuse: bool = False) -> None:
    """Warn (or refuse, :class:`ConfigError`) when a file holding secrets can be read by
    users other than its owner."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if mode & (stat.S_IRGRP | stat.S_IROTH):
        message = (
            f"{what} {path} is readable by other users (mode {stat.S_IMODE(mode):o}); "
            f"chmod 600 {path}"
        )
        if refuse:
            raise ConfigError(message)
        log.warning("%s", message)


class RateLimiter:
    """A token bucket per identity: ``rate_per_s`` on average, ``burst`` at once."""

    def __init__(self, rate_per_s: float = DEFAULT_RATE_PER_S, burst: int = DEFAULT_BURST) -> None:
        self.rate_per_s = rate_per_s
        self.burst = burst
        self._buckets: dict[Any, tuple[float, float]] = {}

    def take(self, identity: Any) -> bool:
        """Whether ``identity`` may send one more request now."""
        now = time.monotonic()
        level, at = self._buckets.get(identity, (float(self.burst), now))
        level = min(float(self.burst), level + (now - at) * self.rate_per_s)
        if level < 1.0:
            self._buckets[identity] = (level, now)
            return False
        self._buckets[identity] = (level - 1.0, now)
        return True
