"""A manifest's ``[limit]``, ``[lock]`` and ``[escalate]``, compiled for the registry.

The run-time side lives in :mod:`hookbus.state.rules`; this module turns the validated
manifest sections into it, so the registry's only knowledge of fleet-wide rules is three
calls: :func:`state_call` around a hook's action, :func:`escalate_rule` for the snapshot,
:func:`escalate` after the chain.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hookbus.hooks.manifest_model import HookManifest
from hookbus.state.rules import EscalateRule, HookRules, LimitRule, LockRule, escalate
from hookbus.state.store import FleetState
from hookbus.state.templates import compile_template

__all__ = ["escalate", "escalate_rule", "has_state_rules", "state_call"]


def has_state_rules(manifest: HookManifest | None) -> bool:
    """Whether a manifest declares a limit or a lock (checked around its action)."""
    return isinstance(manifest, HookManifest) and (
        manifest.limit is not None or manifest.lock is not None
    )


def state_call(
    manifest: HookManifest,
    call: Callable[..., Any],
    state: FleetState | None,
    kinds: tuple[str, ...],
) -> HookRules:
    """``call`` behind the manifest's lock and limit."""
    limit = manifest.limit
    lock = manifest.lock
    return HookRules(
        manifest.name,
        call,
        state=state,
        limit=None
        if limit is None
        else LimitRule(
            key=compile_template(limit.key),
            template=limit.key,
            max_count=limit.max,
            window_ms=limit.window_ms,
            outcome=limit.outcome,
        ),
        lock=None
        if lock is None
        else LockRule(
            key=compile_template(lock.key),
            template=lock.key,
            ttl_ms=lock.ttl_ms,
            release_on=frozenset(lock.release_on),
            outcome=lock.outcome,
        ),
        acquire_kinds=frozenset(kinds),
        shadow=manifest.mode == "shadow",
    )


def escalate_rule(manifest: HookManifest | None) -> EscalateRule | None:
    """The manifest's escalation rule (None when it declares none)."""
    if not isinstance(manifest, HookManifest) or manifest.escalate is None:
        return None
    spec = manifest.escalate
    return EscalateRule(
        hook=manifest.name,
        after=spec.after,
        within_ms=spec.within_ms,
        of=spec.of,
        per=spec.per,
        then=spec.then,
    )
