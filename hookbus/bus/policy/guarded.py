"""The failure policy a bundle publishes: the kinds that fail closed when the fleet cannot
answer, whatever their configured default.

A kind with an enabled guard in the current bundle (a hook with ``on_error = "deny"`` or
declared ``guard = true``, in enforce mode) must never become an allow because Redis stalled,
answered ``BUSY``, refused the request stream, no worker is alive, or the event was too large
to send. ``hookbus reload`` (and a rollback) writes the set of such kinds next to the stamp,
in the same transaction (``hookbus:{ns}:failpolicy``, JSON ``{"version", "deny"}``);
every producer reads it with its liveness check (one more command in a pipeline it already
sends, so no extra round trip: about once a second per producer, the liveness cache's
lifetime). When it cannot read it
(the very failure it must decide on) it uses the last copy it saw: in memory for long-lived
producers, else the small file a per-event process keeps in its cache folder
(``$XDG_CACHE_HOME/hookbus/failpolicy-<ns>.json``), rewritten only when the policy changes.

Standard library only: the per-event agent hook imports this.
"""

from __future__ import annotations

import os

from hookbus.bus import lean_json
from hookbus.bus.policy.failure import unanswered

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs ~2 ms per process
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any


#: Said in the reason of a request denied because the current bundle guards its kind.
GUARDED_NOTE = "the current bundle guards this kind, so it fails closed"


def encode(version: str, kinds: Iterable[str]) -> str:
    """The stored form of a bundle's policy (written by reloads, never on the per-event path,
    so the full ``json`` module is imported here only)."""
    import json

    return json.dumps({"version": version, "deny": sorted(set(kinds))}, separators=(",", ":"))


def decode(raw: object) -> frozenset[str] | None:
    """The kinds a stored policy denies (empty for a bundle without guards); None when
    nothing is stored or the value is unreadable: then keep what was known. A missing key
    is not "nothing is guarded": every reload writes the key, so its absence means Redis
    lost it (restarted empty, failed over to an empty replica, flushed), which is exactly
    when the guards must not turn into allows."""
    if raw is None:
        return None
    try:
        data = lean_json.loads(raw if isinstance(raw, bytes) else str(raw))
    except (ValueError, UnicodeDecodeError):
        return None
    kinds = data.get("deny") if isinstance(data, dict) else None
    if not isinstance(kinds, list):
        return None
    return frozenset(k for k in kinds if isinstance(k, str))


def cache_path(namespace: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The per-user file a per-event process keeps the last policy in; None without a home."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME", "").strip()
    if not base:
        home = env.get("HOME", "").strip()
        if not home:
            return None
        base = os.path.join(home, ".cache")
    return os.path.join(base, "hookbus", f"failpolicy-{namespace}.json")


def read_cached(path: str | None) -> frozenset[str]:
    """The kinds the cached file denies (empty when there is none or it is unreadable)."""
    if path is None:
        return frozenset()
    try:
        with open(path, "rb") as fh:
            return decode(fh.read()) or frozenset()
    except OSError:
        return frozenset()


def write_cached(path: str | None, kinds: frozenset[str]) -> None:
    """Replace the cached file (atomically, private to the user); errors are ignored: the
    cache only helps while the fleet cannot be read."""
    if path is None:
        return
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        tmp = f"{path}.{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(encode("", kinds))
        os.replace(tmp, path)
    except OSError:
        return


class FailPolicy:
    """What one producer knows of the published policy: read from Redis with the liveness
    check, else from the cache file."""

    __slots__ = ("_file", "_kinds")

    def __init__(self, namespace: str, environ: Mapping[str, str] | None = None) -> None:
        self._file = cache_path(namespace, environ)
        self._kinds: frozenset[str] | None = None  # None: never read from Redis

    def update(self, raw: object) -> None:
        """Take the value read from Redis; the cache file follows when it changed."""
        kinds = decode(raw)
        if kinds is None:
            return
        if kinds != self._cached():
            write_cached(self._file, kinds)
        self._kinds = kinds

    def _cached(self) -> frozenset[str]:
        return read_cached(self._file)

    def denies(self, kind: str) -> bool:
        """Whether ``kind`` must fail closed: per the last policy read from Redis, else
        per the cache file."""
        kinds = self._kinds if self._kinds is not None else self._cached()
        return kind in kinds

    def overrules(self, kind: str, outcome: object, degraded: object) -> bool:
        """Whether a worker's answer must become a deny here: a degraded allow (a worker
        with no hooks, or none that decided) for a kind this producer knows is guarded.
        A worker that restarted after Redis lost the stamp and the policy cannot know the
        kind is guarded; the producer that read the policy before does."""
        return degraded is True and outcome == "allow" and self.denies(kind)

    def closed(self, kind: str, decision: dict[str, Any]) -> dict[str, Any]:
        """``decision`` (a decoded Decision), made a deny when :meth:`overrules` says so."""
        if not self.overrules(kind, decision.get("outcome"), decision.get("degraded")):
            return decision
        reason = f"{decision.get('reason')}; {GUARDED_NOTE}"
        return {**decision, "outcome": "deny", "reason": reason}


def fails_closed(policy: str | None, guards: FailPolicy | None, kind: str) -> str:
    """The failure policy (:func:`~hookbus.bus.policy.failure.unanswered`) of ``kind``
    configured ``policy`` (None: none), under the policy ``guards`` last read."""
    return unanswered(kind, policy, guarded=guards is not None and guards.denies(kind))
