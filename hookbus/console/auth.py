"""Who may use the console: a token, exchanged for a session cookie.

The token comes from ``HOOKBUS_CONSOLE_TOKEN``, a token file (``--token-file``), or is
generated at start and printed as a login URL (``http://127.0.0.1:8788/?token=...``).
With a tokens file (``--tokens``: ``NAME TOKEN`` lines, the gateway's format) each operator
has a token of their own, and what they decide is recorded as ``operator:NAME``: an
approval that needs two operators needs two of these.
Opening that URL (or posting the token to ``/login``) sets a session cookie: random,
``HttpOnly`` (scripts cannot read it), ``SameSite=Strict`` (no other site's page can make
the browser send it), valid for :data:`SESSION_TTL_S`; the URL is then redirected to one
without the token, so it stays out of the history. The JSON API also takes
``Authorization: Bearer <token>``. Everything else is refused with 401.

State-changing calls are CSRF-safe twice over: the cookie is never sent cross-site, and a
cookie-authenticated POST must also carry the session's own CSRF token in the
``X-HookBus-CSRF`` header (the page holds it; another origin cannot read it) and, when the
browser sends one, an ``Origin`` equal to the console's own (and no cross-site
``Sec-Fetch-Site``). Bearer calls carry no cookie and need neither. ``POST /logout`` takes
the same origin check: the response that deletes the cookie is honoured by the browser
even when another site's page sent the form. Tokens are compared in constant time.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections.abc import Mapping
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
    """One login: its CSRF token, when it ends (monotonic seconds), and the operator whose
    token opened it (None: the console's one shared token)."""

    csrf: str
    expires: float
    operator: str | None = None


@dataclass(frozen=True)
class Caller:
    """An authenticated request: by ``bearer`` token, or by a ``session`` cookie; with
    ``operator`` when the token is one operator's own."""

    bearer: bool
    session: Session | None
    operator: str | None = None


class ConsoleAuth:
    """The token and the live sessions of one console process (in memory: a restarted
    console asks for the token again)."""

    def __init__(
        self, token: str | None = None, *, operators: Mapping[str, str] | None = None
    ) -> None:
        # token -> the operator it stands for (None: the one shared token)
        named = operators or {}
        self._tokens: dict[str, str | None] = {t: f"operator:{n}" for t, n in named.items()}
        if token is not None:
            self._tokens[token] = None
        if not self._tokens or any(len(t) < 16 for t in self._tokens):
            raise ValueError("every console token must be at least 16 characters")
        self.token = token
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    @staticmethod
    def generate() -> str:
        return secrets.token_urlsafe(24)

    def identify(self, given: str | None) -> tuple[bool, str | None]:
        """(known, operator) of a token; every token compared in constant time."""
        found: tuple[bool, str | None] = (False, None)
        value = str(given or "").encode()
        for token, operator in self._tokens.items():
            if hmac.compare_digest(value, token.encode()) and given:
                found = (True, operator)
        return found

    def token_ok(self, given: str | None) -> bool:
        return self.identify(given)[0]

    def login(self, given: str | None) -> str | None:
        """A new session id for a known token, else None."""
        known, operator = self.identify(given)
        if not known:
            return None
        sid = secrets.token_urlsafe(32)
        now = time.monotonic()
        with self._lock:
            if len(self._sessions) >= MAX_SESSIONS:
                self._sessions = {k: s for k, s in self._sessions.items() if s.expires > now} or {}
                while len(self._sessions) >= MAX_SESSIONS:
                    self._sessions.pop(next(iter(self._sessions)))
            self._sessions[sid] = Session(
                secrets.token_urlsafe(24), now + SESSION_TTL_S, operator=operator
            )
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
        if scheme.lower() == "bearer":
            known, operator = self.identify(value.strip())
            if known:
                return Caller(bearer=True, session=None, operator=operator)
        found = self.session(request.cookies.get(COOKIE))
        if found is None:
            return None
        return Caller(bearer=False, session=found, operator=found.operator)

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
        return ConsoleAuth.same_origin(request)

    @staticmethod
    def same_origin(request: Request) -> bool:
        """Whether a POST comes from the console's own pages, as far as the browser says.
        ``Sec-Fetch-Site`` decides when sent: ``same-origin`` / ``none`` only (the console's
        own form then sends ``Origin: null``, its pages sending no referrer). Without it,
        an ``Origin`` other than the console's own, ``null`` included, is another site's.
        A client that sends neither (curl, scripts) is no browser another site drives."""
        origin = request.headers.get("origin")
        own = f"{request.url.scheme}://{request.url.netloc}"
        fetch_site = request.headers.get("sec-fetch-site")
        if fetch_site is not None:
            return fetch_site in ("same-origin", "none") and origin in (None, "null", own)
        return origin is None or origin == own
