"""The failure policy: what a request decides when the bus cannot answer it.

One rule, for every caller that can meet the case (the SDK's two clients, the gateway, the
per-event agent-CLI hook, and the chain workers' own degraded answers):

1. a kind the current bundle guards (the published policy,
   :mod:`~hookbus.bus.policy.guarded`) is denied, whatever anyone configured;
2. otherwise the configured ``on_timeout`` decides (the request's own, the kind's, a CLI's
   own event name, or ``default``);
3. otherwise :data:`~hookbus.defaults.DENY_ON_TIMEOUT_KINDS` decides: deny for the kinds a
   guard must never let through unseen, allow for the rest.

The adapters' guard routes (:class:`~hookbus.harnesses.adapters.Route`) are exactly the
request routes of those kinds; a test holds the two together.

Standard library only: the per-event hook imports this.
"""

from __future__ import annotations

from hookbus.defaults import DENY_ON_TIMEOUT_KINDS


def unanswered(kind: str, configured: object = None, *, guarded: bool = False) -> str:
    """``"deny"`` or ``"allow"``: what a request of ``kind`` (its canonical name) decides
    when nothing answers it. ``configured`` is the configured ``on_timeout`` (None: none);
    ``guarded`` whether the published policy names the kind."""
    if guarded:
        return "deny"
    if configured in ("allow", "deny"):
        return str(configured)
    return "deny" if kind in DENY_ON_TIMEOUT_KINDS else "allow"


def table_denies(kind: str) -> bool:
    """Whether the defaults table fails ``kind`` closed (no configuration, no bundle)."""
    return kind in DENY_ON_TIMEOUT_KINDS
