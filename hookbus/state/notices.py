"""Notices: a message from an operator to every matching running session, delivered once.

``hookbus notify "main is frozen until 18:00" --ttl 2h`` stores a notice in the namespace's
notice hash. Chain workers keep the live notices in memory (reloaded only when the notices'
version counter moved, read at most once a second) and, on each request of a kind that may
carry added context, give a matching session each notice once: the first worker to add the
session to the notice's ``seen`` set (``SADD`` answers 1) adds the text to the decision's
context, so a session gets a notice exactly once across the whole fleet. A session is its
agent's (``AGENT/SESSION`` in the ``seen`` set): another agent sending the same session id
neither takes the owner's delivery nor matches a notice sent to that session, which names
its agent exactly. A blocking notice also refuses every tool call of a matching session
until it expires or is retracted.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from hookbus.bus import keys
from hookbus.bus.wire import Decision, Event, new_id
from hookbus.errors import NoticeNotFound
from hookbus.state.sessions import event_session

if TYPE_CHECKING:
    import redis

log = logging.getLogger(__name__)

Severity = Literal["info", "warning", "critical"]
SEVERITIES: tuple[Severity, ...] = ("info", "warning", "critical")
#: How often a worker checks whether the notices changed, in seconds.
NOTICE_REFRESH_S = 1.0
#: Kinds whose requests a blocking notice refuses: the agent's tool calls.
TOOL_CALL_KINDS = frozenset({"PreToolUse", "PermissionRequest"})
#: Longest notice text kept, in characters.
MAX_NOTICE_CHARS = 2_000


@dataclass(frozen=True)
class Notice:
    """One notice: what it says, to whom, until when (Redis milliseconds)."""

    id: str
    text: str
    severity: Severity
    expires_ms: int
    created_ms: int
    created_by: str
    agent: str | None = None
    session: str | None = None
    blocking: bool = False

    def matches(self, event: Event) -> bool:
        if self.session is not None:
            if event.session_id != self.session:
                return False
            # a session is its agent's: the same id sent by another agent is not this one
            if self.agent is not None and event.agent_id != self.agent:
                return False
        return self.agent is None or fnmatch.fnmatchcase(event.agent_id or "", self.agent)

    def as_context(self) -> str:
        return f"[hookbus notice, {self.severity}] {self.text}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: bytes | str) -> Notice:
        data = json.loads(raw)
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def _redis_ms(client: redis.Redis) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def notify(
    client: redis.Redis,
    namespace: str,
    text: str,
    *,
    severity: Severity = "info",
    ttl_ms: int,
    created_by: str,
    agent: str | None = None,
    session: str | None = None,
    blocking: bool = False,
) -> Notice:
    """Store a notice (``client`` on the namespace's own master) and return it."""
    if severity not in SEVERITIES:
        raise ValueError(f"severity must be one of {', '.join(SEVERITIES)}, got {severity!r}")
    if blocking and severity != "critical":
        raise ValueError("only a critical notice can be blocking (--severity critical)")
    if session is not None and (not agent or any(c in agent for c in "*?[")):
        raise ValueError(
            "a session belongs to the agent that opened it, and another agent may send the "
            "same session id: give the session's agent exactly with --agent AGENT_ID "
            "(no pattern) together with --session"
        )
    text = text.strip()
    if not text or len(text) > MAX_NOTICE_CHARS:
        raise ValueError(f"a notice says something, in at most {MAX_NOTICE_CHARS} characters")
    now = _redis_ms(client)
    notice = Notice(
        id=new_id(),
        text=text,
        severity=severity,
        expires_ms=now + ttl_ms,
        created_ms=now,
        created_by=created_by,
        agent=agent,
        session=session,
        blocking=blocking,
    )
    with client.pipeline(transaction=True) as pipe:
        pipe.hset(keys.notices(namespace), notice.id, json.dumps(notice.to_dict()))
        pipe.incr(keys.notices_version(namespace))
        pipe.execute()
    return notice


def live_notices(client: redis.Redis, namespace: str) -> list[Notice]:
    """The notices not yet expired, oldest first; expired ones are removed on the way."""
    now = _redis_ms(client)
    raw = client.hgetall(keys.notices(namespace))
    live: list[Notice] = []
    dead: list[str] = []
    for notice_id, value in raw.items():
        text = notice_id.decode() if isinstance(notice_id, bytes) else str(notice_id)
        try:
            notice = Notice.from_json(value)
        except (ValueError, TypeError, KeyError):
            dead.append(text)
            continue
        if notice.expires_ms > now:
            live.append(notice)
        else:
            dead.append(text)
    if dead:
        with client.pipeline(transaction=True) as pipe:
            pipe.hdel(keys.notices(namespace), *dead)
            for notice_id in dead:
                pipe.delete(keys.notice_seen(namespace, notice_id))
            pipe.incr(keys.notices_version(namespace))
            pipe.execute()
    return sorted(live, key=lambda n: n.created_ms)


def retract(client: redis.Redis, namespace: str, notice_id: str) -> Notice:
    """Remove a notice at once (NoticeNotFound when there is none by that id)."""
    raw = client.hget(keys.notices(namespace), notice_id)
    if raw is None:
        raise NoticeNotFound(notice_id)
    with client.pipeline(transaction=True) as pipe:
        pipe.hdel(keys.notices(namespace), notice_id)
        pipe.delete(keys.notice_seen(namespace, notice_id))
        pipe.incr(keys.notices_version(namespace))
        pipe.execute()
    return Notice.from_json(raw)


class NoticeBoard:
    """A worker's view of the live notices, applied to each decision it makes."""

    def __init__(
        self,
        client: redis.Redis,
        namespace: str,
        *,
        takes_context: Callable[[str], bool],
        refresh_s: float = NOTICE_REFRESH_S,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.takes_context = takes_context
        self.refresh_s = refresh_s
        self._notices: tuple[Notice, ...] = ()
        self._version: bytes | None = None
        self._checked = 0.0
        self._lock = threading.Lock()
        #: (notice id, AGENT/SESSION) pairs this worker knows were delivered (spares the SADD)
        self._seen: set[tuple[str, str]] = set()
        self._offset_ms = 0.0

    def _refresh(self) -> None:
        now = time.monotonic()
        if now - self._checked < self.refresh_s or not self._lock.acquire(blocking=False):
            return
        try:
            self._checked = now
            with self.client.pipeline(transaction=False) as pipe:
                pipe.get(keys.notices_version(self.namespace))
                pipe.time()
                version, (seconds, micros) = pipe.execute()
            redis_ms = int(seconds) * 1000 + int(micros) // 1000
            # expiry is judged on Redis's clock: remember how far this host's clock is off
            self._offset_ms = redis_ms - time.time() * 1000
            if version != self._version:
                self._notices = tuple(live_notices(self.client, self.namespace))
                self._version = version
                live = {n.id for n in self._notices}
                self._seen = {pair for pair in self._seen if pair[0] in live}
        except Exception as exc:  # keep the last known notices; try again next second
            log.warning("notices: could not refresh (%s); keeping %d", exc, len(self._notices))
        finally:
            self._lock.release()

    def apply(self, event: Event, decision: Decision) -> Decision:
        """``decision`` with the notices due to ``event``'s session: a blocking notice
        refuses a tool call, the others are added once to the context."""
        self._refresh()
        notices = self._notices
        session = event_session(event)
        if not notices or session is None:
            return decision
        redis_now_ms = time.time() * 1000 + self._offset_ms
        for notice in notices:
            if notice.expires_ms <= redis_now_ms or not notice.matches(event):
                continue
            if (
                notice.blocking
                and event.kind in TOOL_CALL_KINDS
                and decision.outcome in ("allow", "ask")
            ):
                decision.outcome = "deny"
                decision.reason = f"refused by a critical notice: {notice.text}"
                continue
            if not self.takes_context(event.kind) or (notice.id, session) in self._seen:
                continue
            seen_key = keys.notice_seen(self.namespace, notice.id)
            try:
                with self.client.pipeline(transaction=False) as pipe:
                    pipe.sadd(seen_key, session)
                    pipe.pexpire(seen_key, max(int(notice.expires_ms - redis_now_ms), 1000))
                    first, _ = pipe.execute()
            except Exception as exc:
                log.warning("notice %s: delivery not recorded (%s); will retry", notice.id, exc)
                continue
            self._seen.add((notice.id, session))
            if first:
                decision.context = [notice.as_context(), *decision.context]
        return decision
