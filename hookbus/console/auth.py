"""Who may use the console: one token, exchanged for a session cookie.

The token comes from ``HOOKBUS_CONSOLE_TOKEN``, a token file (``--token-file``), or is
generated at start and printed as a login URL (``http://127.0.0.1:8788/?token=...``).
Opening that URL (or posting the token to ``/login``) sets a session cookie: random,
``HttpOnly`` (scripts cannot read it), ``SameSite=Strict`` (no other site's page can make
the browser send it), valid for :data:`SESSION_TTL_S`; the URL is then redirected to one
without the token, so it stays out of the history. The JSON API also takes
``Authorization: Bearer <token>``. Everything else is refused with 401.

State-changing calls are CSRF-safe twice over: the cookie is never sent cross-site, and a
cookie-authenticated POST must also carry the session's own CSRF token in the
``X-HookBus-CSRF`` header (the page holds it; another origin cannot read it) and, when the
browser sends one, an ``Origin`` equal to the console's own. Bearer calls carry no cookie
and need neither. Tokens are compared in constant time.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.requests import Request

#: Name of the session cookie.
COOKIE = "hookbus_console"
#: Header a cookie-authenticated state-changing call must carry.
CSRF_HEADER = "x-hookbus-csrf"
#: How long a login lasts, in seconds.
SESSION_TTL_S = 12 * 3600
#: Most sessions kept (the oldest are dropped beyond it).
MAX_SESSIONS = 1000


@dataclass(frozen=True)
class Session:
    """One login: its CSRF token and when it ends (monotonic seconds)."""

    csrf: str
    expires: float


@dataclass(frozen=True)
class Caller:
    """An authenticated request: by ``bearer`` token, or by a ``session`` cookie."""

    bearer: bool
    session: Session | None


class ConsoleAuth:
    """The token and the live sessions of one console process (in memory: a restarted
    console asks for the token again)."""

    def __init__(self, token: str) -> None:
        if len(token) < 16:
            raise ValueError("the console token must be at least 16 characters")
        self.token = token
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    @staticmethod
    def generate() -> str:
        return secrets.token_urlsafe(24)

    def token_ok(self, given: str | None) -> bool:
        return bool(given) and hmac.compare_digest(str(given).encode(), self.token.encode())

    def login(self, given: str | None) -> str | None:
        """A new session id for the right token, else None."""
        if not self.token_ok(given):
            return None
        sid = secrets.token_urlsafe(32)
        now = time.monotonic()
        with self._lock:
            if len(self._sessions) >= MAX_SESSIONS:
                self._sessions = {k: s for k, s in self._sessions.items() if s.expires > now} or {}
                while len(self._sessions) >= MAX_SESSIONS:
                    self._sessions.pop(next(iter(self._sessions)))
            self._sessions[sid] = Session(secrets.token_urlsafe(24), now + SESSION_TTL_S)
        return sid

    def logout(self, sid: str | None) -> None:
        with self._lock:
            self._sessions.pop(sid or "", None)

    def session(self, sid: str | None) -> Session | None:
        if not sid:
            return None
        with self._lock:
            found = self._sessions.get(sid)
            if found is not None and found.expires <= time.monotonic():
                self._sessions.pop(sid, None)
                return None
        return found

    def caller(self, request: Request) -> Caller | None:
        """Who is calling: a valid bearer token, or a live session cookie; else None."""
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and self.token_ok(value.strip()):
            return Caller(bearer=True, session=None)
        found = self.session(request.cookies.get(COOKIE))
        return Caller(bearer=False, session=found) if found is not None else None

    @staticmethod
    def may_change(request: Request, caller: Caller) -> bool:
        """Whether a state-changing call is not a forgery (see the module text)."""
        if caller.bearer:
            return True
        session = caller.session
        if session is None:
            return False
        given = request.headers.get(CSRF_HEADER, "")
        if not given or not hmac.compare_digest(given.encode(), session.csrf.encode()):
            return False
        origin = request.headers.get("origin")
        if origin is None or origin == "null":
            return origin is None
        return origin == f"{request.url.scheme}://{request.url.netloc}"
