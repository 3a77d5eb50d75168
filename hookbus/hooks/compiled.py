"""A hook as the registry holds it: the :class:`HookDescriptor` it shows (``hookbus hooks
list``, :meth:`~hookbus.hooks.registry.HookRegistry.hooks`) and the :class:`CompiledHook`
the chain runs (plain attributes, nothing validated per call). Its own module so that the
registry, which builds these, and the chain, which runs them, need not import each other.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from hookbus.errors import HookRegistrationError
from hookbus.hooks.conditions import Predicate
from hookbus.hooks.results import Permissions

if TYPE_CHECKING:
    from hookbus.hooks.action_kinds import Built
    from hookbus.hooks.manifest_model import HookManifest

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
    retries: Any
    batch: Any
    on_error: OnError
    match: str = "all events"
    description: str = ""
    handler: str = ""
    manifest: Any = field(default=None, repr=False, compare=False)
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
