"""A hook as the registry holds it: the :class:`HookDescriptor` it shows (``hookbus hooks
list``, :meth:`~hookbus.hooks.registry.HookRegistry.hooks`) and the :class:`CompiledHook`
the chain runs (plain attributes, nothing validated per call), built from a manifest
(:func:`manifest_hook`) or a function (:func:`static_hook`); and the :class:`Snapshot` of a
registry's hooks that one request runs on (:func:`snapshot`). Its own module so that the
registry, which builds these, and the chain, which runs them, need not import each other.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from hookbus.errors import HookRegistrationError
from hookbus.hooks.actions.kinds import ACTION_KINDS
from hookbus.hooks.actions.scope import order_key
from hookbus.hooks.conditions import Predicate
from hookbus.hooks.permissions import Permissions
from hookbus.hooks.state_rules import escalate_rule, has_state_rules
from hookbus.state.rules import EscalateRule

if TYPE_CHECKING:
    from hookbus.hooks.actions.kinds import Built
    from hookbus.hooks.manifest_model import HookManifest
    from hookbus.hooks.spec_models import BatchSpec, MatchSpec, RetrySpec

Source = Literal["static", "dynamic"]
#: How a shadow hook that could not be registered is reported (``hook 'x': <this>: why``):
#: a worker's hook set stays complete without it, since shadow hooks decide nothing.
SHADOW_NOT_LOADED = "shadow hook not loaded (a trial; the answers do not depend on it)"
OnError = Literal["allow", "deny"]


@dataclass(frozen=True)
class HookDescriptor:
    """What :meth:`HookRegistry.hooks` and :meth:`HookRegistry.matching` return about a hook."""

    id: str
    events: tuple[str, ...]
    priority: int
    source: Source
    blocking: bool | None
    enabled: bool
    action: str
    timeout_s: float | None
    retries: RetrySpec
    batch: BatchSpec | None
    on_error: OnError
    match: str = "all events"
    description: str = ""
    handler: str = ""
    manifest: HookManifest | None = field(default=None, repr=False, compare=False)
    #: ``enforce``, or ``shadow``: run after the chain, recorded, never applied
    mode: str = "enforce"
    #: a ``blocking = false`` hook that also runs inside the chain of a blocking request
    #: (advisory, on the agent's critical path) instead of as an observer's RQ job
    inline: bool = False


class CompiledHook:
    """A compiled hook: plain attributes read by the chain, nothing validated per call."""

    __slots__ = (
        "advisory",
        "call",
        "descriptor",
        "direct",
        "enabled",
        "events",
        "id",
        "inline_deadline",
        "inline_free",
        "limit_ns",
        "match",
        "on_error",
        "perms",
        "prepend",
        "priority",
        "seq",
        "shadow",
        "source",
        "timeout_ns",
        "timeout_s",
        "warned",
    )

    def __init__(
        self,
        *,
        hook_id: str,
        events: tuple[str, ...],
        priority: int,
        seq: int,
        source: Source,
        call: Callable[..., Any],
        direct: Callable[[Any], Any] | None,
        match: Predicate | None,
        on_error: OnError,
        timeout_s: float | None,
        perms: dict[str, Permissions],
        enabled: bool,
        advisory: bool,
        prepend: bool,
        descriptor: HookDescriptor,
        isolate: bool | None = None,
        shadow: bool = False,
    ) -> None:
        self.id = hook_id
        self.events = events
        self.priority = priority
        self.seq = seq
        self.source = source
        self.call = call
        self.direct = direct
        self.match = match
        self.on_error = on_error
        self.timeout_s = timeout_s
        self.perms = perms
        self.enabled = enabled
        self.advisory = advisory
        self.prepend = prepend
        self.descriptor = descriptor
        #: a shadow hook: the registry runs it apart, after the enforcing chain
        self.shadow = shadow
        self.warned: set[str] = set()
        # a sync python hook runs inline (no thread hand-off) unless it may need abandoning:
        # isolate=True always, isolate=None (manifest default) when a deadline is in force
        self.inline_free = direct is not None and isolate is not True
        self.inline_deadline = direct is not None and isolate is False
        self.timeout_ns = None if timeout_s is None else int(timeout_s * 1e9)
        #: the timeout in ns, or a bound no call reaches: one comparison on the hot path
        self.limit_ns = 1 << 126 if self.timeout_ns is None else self.timeout_ns


#: Largest priority magnitude accepted (keeps typos like 1e12 out).
MAX_PRIORITY = 1_000_000


def check_common(hook_id: Any, priority: Any, on_error: Any, timeout_s: Any) -> None:
    """Reject a bad id, priority, on_error or timeout at registration, naming the hook."""
    if not isinstance(hook_id, str) or not hook_id:
        raise HookRegistrationError(str(hook_id), "hook ids are non-empty strings")
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise HookRegistrationError(
            hook_id, f"priority must be an integer (lower runs first), got {priority!r}"
        )
    if abs(priority) > MAX_PRIORITY:
        raise HookRegistrationError(
            hook_id, f"priority {priority} is out of range (±{MAX_PRIORITY})"
        )
    if on_error not in ("allow", "deny"):
        raise HookRegistrationError(hook_id, f"on_error must be allow or deny, got {on_error!r}")
    if timeout_s is not None and (
        isinstance(timeout_s, bool)
        or not isinstance(timeout_s, int | float)
        or not timeout_s > 0
        or math.isinf(timeout_s)
    ):
        raise HookRegistrationError(hook_id, f"timeout_s must be > 0, got {timeout_s!r}")


def manifest_hook(
    manifest: HookManifest,
    *,
    kinds: tuple[str, ...],
    seq: int,
    built: Built,
    match: Predicate | None,
    perms: dict[str, Permissions],
) -> CompiledHook:
    """The compiled form of a (validated) manifest whose action is already built."""
    descriptor = HookDescriptor(
        id=manifest.name,
        events=kinds,
        priority=manifest.priority,
        source="dynamic",
        blocking=manifest.blocking,
        enabled=manifest.enabled,
        action=manifest.action.kind,
        timeout_s=manifest.timeout_s,
        retries=manifest.retries,
        batch=manifest.batch,
        on_error=manifest.on_error,
        match=manifest.match.summary(),
        description=manifest.description,
        handler=built.handler,
        manifest=manifest,
        mode=manifest.mode,
        inline=manifest.inline,
    )
    return CompiledHook(
        hook_id=manifest.name,
        events=kinds,
        priority=manifest.priority,
        seq=seq,
        source="dynamic",
        call=built.call,
        direct=built.direct,
        match=match,
        on_error=manifest.on_error,
        timeout_s=manifest.timeout_s,
        perms=perms,
        enabled=manifest.enabled,
        advisory=manifest.blocking is False,
        prepend=built.prepend,
        descriptor=descriptor,
        isolate=built.isolate,
        shadow=manifest.mode == "shadow",
    )


def static_hook(
    hook_id: str,
    fn: Callable[[Any], Any],
    *,
    kinds: tuple[str, ...],
    seq: int,
    priority: int,
    match: MatchSpec | Mapping[str, Any] | None,
    predicate: Predicate | None,
    on_error: OnError,
    timeout_s: float | None,
    isolate: bool,
    description: str,
    perms: dict[str, Permissions],
) -> CompiledHook:
    """The compiled form of a (checked) code hook: ``fn`` called as a python action."""
    from hookbus.hooks.actions.python import PythonCall
    from hookbus.hooks.spec_models import MatchSpec, RetrySpec

    call = PythonCall(hook_id, fn, isolate=isolate)
    match_summary = "all events"
    if match is not None:
        spec = match if isinstance(match, MatchSpec) else MatchSpec.model_validate(dict(match))
        match_summary = spec.summary()
    descriptor = HookDescriptor(
        id=hook_id,
        events=kinds,
        priority=priority,
        source="static",
        blocking=None,
        enabled=True,
        action="python",
        timeout_s=float(timeout_s) if timeout_s is not None else None,
        retries=RetrySpec(),
        batch=None,
        on_error=on_error,
        match=match_summary,
        description=description or (fn.__doc__ or "").strip().split("\n")[0],
        handler=f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', fn)}",
    )
    return CompiledHook(
        hook_id=hook_id,
        events=kinds,
        priority=priority,
        seq=seq,
        source="static",
        call=call,
        direct=None if call.is_async else fn,
        match=predicate,
        on_error=on_error,
        timeout_s=descriptor.timeout_s,
        perms=perms,
        enabled=True,
        advisory=False,
        prepend=False,
        descriptor=descriptor,
        isolate=isolate,
    )


@dataclass(frozen=True)
class Snapshot:
    """The hooks a registry holds at one moment, as the chain reads them: built whole on
    every change and published with one assignment, never changed afterwards."""

    version: str | None
    by_id: Mapping[str, CompiledHook]
    by_kind: Mapping[str, tuple[CompiledHook, ...]]
    ordered: tuple[CompiledHook, ...]
    #: shadow hooks per kind, in execution order: run after the chain, never applied
    shadow_by_kind: Mapping[str, tuple[CompiledHook, ...]] = field(default_factory=dict)
    #: escalation rules per kind, applied to the chain's decision
    escalate_by_kind: Mapping[str, tuple[tuple[EscalateRule, Predicate | None], ...]] = field(
        default_factory=dict
    )
    #: the chain of a blocking request per kind: ``by_kind`` without the observers
    #: (``blocking = false`` hooks not marked ``inline``), which see requests as RQ jobs
    chain_by_kind: Mapping[str, tuple[CompiledHook, ...]] = field(default_factory=dict)
    #: kinds some enabled observer hook watches (their answers must reach the decision log)
    observed: frozenset[str] = frozenset()


EMPTY_SNAPSHOT = Snapshot(version=None, by_id={}, by_kind={}, ordered=())


def snapshot(version: str | None, hooks: Iterable[CompiledHook]) -> Snapshot:
    """The snapshot of ``hooks``: in execution order (operators' hooks before agents', each
    by priority, then registration: :func:`~hookbus.hooks.actions.scope.order_key`), per
    kind; shadow hooks apart; a blocking request's chain without the observers
    (``blocking = false`` hooks not marked ``inline``); escalation rules per kind. A disabled
    hook is left out, and so is one whose action does nothing by itself and that has only an
    escalation."""
    everything = sorted(hooks, key=order_key)
    by_kind: dict[str, list[CompiledHook]] = {}
    shadow: dict[str, list[CompiledHook]] = {}
    escalate: dict[str, list[tuple[EscalateRule, Predicate | None]]] = {}
    chain: dict[str, list[CompiledHook]] = {}
    observed: set[str] = set()
    for hook in everything:
        if not hook.enabled:
            continue
        rule = escalate_rule(hook.descriptor.manifest)
        if rule is not None and not hook.shadow:
            for kind in hook.events:
                escalate.setdefault(kind, []).append((rule, hook.match))
            row = ACTION_KINDS.get(hook.descriptor.action)
            if row is not None and row.rules_only and not has_state_rules(hook.descriptor.manifest):
                continue  # only an escalation: nothing to run in the chain
        for kind in hook.events:
            (shadow if hook.shadow else by_kind).setdefault(kind, []).append(hook)
            if hook.shadow:
                continue
            if hook.advisory and not hook.descriptor.inline:
                observed.add(kind)
            else:
                chain.setdefault(kind, []).append(hook)
    return Snapshot(
        version=version,
        by_id={h.id: h for h in everything},
        by_kind={k: tuple(v) for k, v in by_kind.items()},
        ordered=tuple(everything),
        shadow_by_kind={k: tuple(v) for k, v in shadow.items()},
        escalate_by_kind={k: tuple(v) for k, v in escalate.items()},
        chain_by_kind={k: tuple(v) for k, v in chain.items()},
        observed=frozenset(observed),
    )
