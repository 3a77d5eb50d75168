"""The hook registry and the priority chain.

Two kinds of hooks live in one registry: *static* hooks registered from Python code
(:meth:`HookRegistry.register`, the :meth:`HookRegistry.hook` decorator) and *dynamic* hooks
built from manifests (:meth:`HookRegistry.replace_dynamic`, swapped as a whole on reload).

Every change builds a new immutable :class:`~hookbus.hooks.compiled.Snapshot` (per-kind tuples
of compiled hooks in execution order; running them is :mod:`hookbus.hooks.runs`) and publishes
it with one attribute assignment. :meth:`HookRegistry.run` reads that attribute once, so a
request runs entirely on one hook set even while another thread reloads, and the hot path does
no sorting, no pydantic, no regex compile and takes no lock.

Order: ascending priority (default 100), ties by registration order; replace_dynamic
registers manifests in name order. Blocking kinds: deny / ask / halt stop the chain,
``updated`` applies before the next hook, context and signals accumulate, no hooks means
allow. Non-blocking kinds: every matching hook runs, each error isolated in the trace, and
whatever a hook says besides logs is dropped (non-blocking events are infra-only).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from itertools import count
from typing import TYPE_CHECKING, Any

import msgspec

from hookbus.bus.kinds import DEFAULT_CATALOGUE, Catalogue, KindSpec
from hookbus.bus.wire import Decision, Event, HookResult, HookRun
from hookbus.errors import HookBusError, HookNotFound, HookRegistrationError, UnknownEventKind
from hookbus.hooks.actions.egress import EgressPolicy
from hookbus.hooks.actions.scope import AgentPolicy, scope_agent_hook
from hookbus.hooks.compiled import (
    EMPTY_SNAPSHOT,
    SHADOW_NOT_LOADED,
    CompiledHook,
    HookDescriptor,
    OnError,
    Snapshot,
    check_common,
    manifest_hook,
    snapshot,
    static_hook,
)
from hookbus.hooks.conditions import compile_match
from hookbus.hooks.permissions import Permissions, permissions
from hookbus.hooks.runs import run_hooks
from hookbus.hooks.single_run import run_job, try_hook
from hookbus.hooks.state_rules import escalate, state_call
from hookbus.state import fleet
from hookbus.state.notices import NoticeBoard
from hookbus.state.store import FleetState

if TYPE_CHECKING:
    import redis

    from hookbus.bus.settings.schema import Settings
    from hookbus.hooks.manifest_model import HookManifest
    from hookbus.hooks.spec_models import MatchSpec

__all__ = ["DEFAULT_ENV_ALLOWLIST", "HookDescriptor", "HookRegistry"]

logger = logging.getLogger(__name__)

#: The env variables passed to shell hooks when no settings are given.
DEFAULT_ENV_ALLOWLIST: tuple[str, ...] = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR")


class HookRegistry:
    """Holds static and dynamic hooks and runs them against events. Thread-safe.

    ``env_allowlist`` is what shell hooks inherit from this process's environment (plus
    each manifest's ``env``); build one from settings with :meth:`from_settings`.
    """

    def __init__(
        self,
        catalogue: Catalogue = DEFAULT_CATALOGUE,
        *,
        env_allowlist: Iterable[str] | None = None,
        egress: EgressPolicy | None = None,
        allow_unconfined_agent_hooks: bool = False,
        fleet_state: FleetState | None = None,
        notices: NoticeBoard | None = None,
        agent_policy: AgentPolicy | None = None,
    ) -> None:
        self.catalogue = catalogue
        #: the fleet's shared state for [limit] / [lock] / [escalate] and ``hookbus.state.fleet``
        #: (None outside workers: ``hooks run`` and replay check no fleet-wide rule)
        self.fleet_state = fleet_state
        #: the live notices, added to the decisions of a worker's requests
        self.notices = notices
        #: what bounds agents' hooks: their env names, time cap and share of a deadline
        self.agent_policy = agent_policy if agent_policy is not None else AgentPolicy()
        #: security.allow_unconfined_agent_hooks (agents' code runs only confined without it)
        self.allow_unconfined_agent_hooks = allow_unconfined_agent_hooks
        #: where agent-written http hooks may connect and what their headers may carry
        self.egress = egress if egress is not None else EgressPolicy()
        self.env_allowlist: tuple[str, ...] = (
            tuple(env_allowlist) if env_allowlist is not None else DEFAULT_ENV_ALLOWLIST
        )
        self._lock = threading.RLock()
        self._seq = count()
        self._static: dict[str, CompiledHook] = {}
        self._dynamic: dict[str, CompiledHook] = {}
        self._snap: Snapshot = EMPTY_SNAPSHOT
        self._http: Any = None
        self._guarded_http: Any = None
        #: canonical kind name -> spec, so run() skips the catalogue's name normalisation
        self._canonical: dict[str, KindSpec] = {s.kind: s for s in catalogue.specs}

    @classmethod
    def from_settings(cls, settings: Settings) -> HookRegistry:
        """A registry using ``settings.catalogue()``, ``settings.security.env_allowlist`` and
        the egress policy of ``settings.security``."""
        return cls(
            settings.catalogue(),
            env_allowlist=settings.security.env_allowlist,
            egress=EgressPolicy.from_settings(settings),
            allow_unconfined_agent_hooks=settings.security.allow_unconfined_agent_hooks,
            agent_policy=AgentPolicy.from_settings(settings.security),
        )

    @classmethod
    def for_worker(cls, settings: Settings, client: redis.Redis, *, notices: bool) -> HookRegistry:
        """A worker's registry: :meth:`from_settings` with the fleet's shared state (limits,
        locks, escalation, ``hookbus.state.fleet``) and, for chain workers (``notices``), the
        notice board on ``client`` (the namespace's own master)."""
        registry = cls.from_settings(settings)
        registry.fleet_state = FleetState.from_settings(settings)
        if notices:
            catalogue = registry.catalogue

            def takes_context(kind: str) -> bool:
                spec = catalogue.get(kind)
                return spec is not None and spec.context

            registry.notices = NoticeBoard(client, settings.namespace, takes_context=takes_context)
        return registry

    @property
    def version(self) -> str | None:
        """The version given to the last :meth:`replace_dynamic` (the bundle version)."""
        return self._snap.version

    # --- registration -------------------------------------------------------------------

    def _kinds(self, hook_id: str, events: str | Iterable[str]) -> tuple[str, ...]:
        names = [events] if isinstance(events, str) else list(events)
        if not names:
            raise HookRegistrationError(hook_id, "give at least one event kind")
        kinds: list[str] = []
        for name in names:
            if not isinstance(name, str):
                raise HookRegistrationError(hook_id, f"event kinds are strings, got {name!r}")
            try:
                kind = self.catalogue.canonical(name)
            except UnknownEventKind as exc:
                raise HookRegistrationError(hook_id, str(exc)) from None
            if kind not in kinds:
                kinds.append(kind)
        return tuple(kinds)

    def _perms(
        self, kinds: tuple[str, ...], allow_keys: list[str] | None
    ) -> dict[str, Permissions]:
        return {k: permissions(self.catalogue.resolve(k), allow_keys) for k in kinds}

    def register(
        self,
        hook_id: str,
        fn: Callable[[Any], Any],
        *,
        events: str | Iterable[str],
        priority: int = 100,
        match: MatchSpec | Mapping[str, Any] | None = None,
        on_error: OnError = "allow",
        timeout_s: float | None = None,
        isolate: bool = False,
        description: str = "",
    ) -> HookDescriptor:
        """Register (or replace: upsert by id) a static code hook.

        ``fn(event) -> HookResult | dict | None``, sync or async. Checked now, not when
        called: an unknown event kind, a bad priority or a function that does not take one
        argument is rejected with :class:`HookRegistrationError` naming the hook. Static
        hooks survive :meth:`replace_dynamic`. A replaced hook keeps its place among equal
        priorities.

        A sync function is called inline on the caller's thread; with a ``timeout_s`` or a
        request deadline, an overrun is noticed when it returns (a timeout, ``on_error``
        decides). ``isolate=True`` runs it on a worker thread instead, abandoned at
        min(``timeout_s``, time left) while it keeps running (a thread hand-off per call:
        docs/performance.md says what it costs).
        """
        from hookbus.hooks.actions.python import check_signature

        check_common(hook_id, priority, on_error, timeout_s)
        if not callable(fn):
            raise HookRegistrationError(hook_id, f"{fn!r} is not callable")
        kinds = self._kinds(hook_id, events)
        check_signature(hook_id, fn)
        try:
            predicate = compile_match(match)
        except (ValueError, HookBusError) as exc:
            raise HookRegistrationError(hook_id, f"invalid match: {exc}") from None
        with self._lock:
            old = self._static.get(hook_id)
            if hook_id in self._dynamic:
                raise HookRegistrationError(
                    hook_id, "a hook from the hooks folder already has this id; choose another"
                )
            hook = static_hook(
                hook_id,
                fn,
                kinds=kinds,
                seq=old.seq if old is not None else next(self._seq),
                priority=priority,
                match=match,
                predicate=predicate,
                on_error=on_error,
                timeout_s=timeout_s,
                isolate=isolate,
                description=description,
                perms=self._perms(kinds, None),
            )
            self._static[hook_id] = hook
            self._publish(self._snap.version)
        return hook.descriptor

    def hook(
        self,
        *events: str,
        priority: int = 100,
        id: str | None = None,
        match: MatchSpec | Mapping[str, Any] | None = None,
        on_error: OnError = "allow",
        timeout_s: float | None = None,
        isolate: bool = False,
    ) -> Callable[[Callable[[Any], Any]], Callable[[Any], Any]]:
        """Decorator form: ``@registry.hook("PreToolUse", priority=10)``; the id defaults
        to the function's module and qualified name."""

        def decorate(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
            hook_id = id or f"{fn.__module__}.{fn.__qualname__}"
            self.register(
                hook_id,
                fn,
                events=events,
                priority=priority,
                match=match,
                on_error=on_error,
                timeout_s=timeout_s,
                isolate=isolate,
            )
            return fn

        return decorate

    def deregister(self, hook_id: str) -> bool:
        """Remove a static or dynamic hook; unknown ids are a no-op (returns False)."""
        with self._lock:
            found = self._static.pop(hook_id, None) or self._dynamic.pop(hook_id, None)
            if found is not None:
                self._publish(self._snap.version)
            return found is not None

    def replace_dynamic(
        self,
        manifests: Iterable[HookManifest],
        *,
        version: str | None = None,
        strict: bool = False,
        accept: Callable[[list[HookRegistrationError]], bool] | None = None,
    ) -> list[HookRegistrationError]:
        """Swap every dynamic (manifest) hook for ``manifests`` in one step.

        Manifests are registered in name order. One that cannot be registered (its module
        does not import, a ``wake`` action...) is left out and its error returned, unless
        ``strict``: then nothing changes and the first error is raised. ``accept``, given the
        errors, may refuse the swap (False: nothing changes, the errors are returned).
        Static hooks stay; ``registry.version`` becomes ``version``."""
        compiled: dict[str, CompiledHook] = {}
        errors: list[HookRegistrationError] = []
        ordered = sorted(manifests, key=lambda m: m.name)
        with self._lock:
            for manifest in ordered:
                try:
                    if manifest.name in self._static:
                        raise HookRegistrationError(
                            manifest.name,
                            "a hook registered in code already has this id; rename the manifest",
                        )
                    if manifest.name in compiled:
                        raise HookRegistrationError(manifest.name, "duplicate hook name")
                    compiled[manifest.name] = self._compile_manifest(manifest)
                except HookRegistrationError as exc:
                    if strict:
                        raise
                    if getattr(manifest, "mode", "enforce") == "shadow":
                        # says so: a trial that did not load leaves the answers as they are
                        exc = HookRegistrationError(
                            manifest.name, f"{SHADOW_NOT_LOADED}: {exc.reason}"
                        )
                    # returned to the caller, who reports it (the CLI prints, workers warn)
                    logger.debug("hook not registered: %s", exc)
                    errors.append(exc)
            if accept is not None and not accept(errors):
                return errors
            self._dynamic = compiled
            self._publish(version)
        return errors

    def register_manifest(self, manifest: HookManifest) -> HookDescriptor:
        """Add or replace one dynamic hook from a manifest (``hookbus hooks run``, tests)."""
        with self._lock:
            hook = self._compile_manifest(manifest)
            self._dynamic[hook.id] = hook
            self._publish(self._snap.version)
        return hook.descriptor

    def _compile_manifest(self, manifest: HookManifest) -> CompiledHook:
        from hookbus.hooks.actions.kinds import build_action

        hook_id = manifest.name
        kinds = self._kinds(hook_id, manifest.events)
        check_common(hook_id, manifest.priority, manifest.on_error, manifest.timeout_s)
        built = build_action(self, manifest)
        try:
            predicate = compile_match(manifest.match)
        except (ValueError, HookBusError) as exc:  # pragma: no cover - validated by pydantic
            raise HookRegistrationError(hook_id, f"invalid match: {exc}") from None
        if manifest.limit is not None or manifest.lock is not None:
            # checked through the wrapped call, which is given the time left: no inline call
            rules = state_call(manifest, built.call, self.fleet_state, kinds)
            built = dataclasses.replace(built, call=rules, direct=None)
            if manifest.release_kinds:
                kinds = (*kinds, *self._kinds(hook_id, manifest.release_kinds))
        call, direct, predicate = scope_agent_hook(
            manifest, built.call, built.direct, predicate, self.agent_policy
        )
        built = dataclasses.replace(built, call=call, direct=direct)
        old = self._dynamic.get(hook_id)
        return manifest_hook(
            manifest,
            kinds=kinds,
            seq=next(self._seq) if old is None else old.seq,
            built=built,
            match=predicate,
            perms=self._perms(kinds, list(manifest.modify.allow_keys)),
        )

    def _publish(self, version: str | None) -> None:
        """Build and publish a new snapshot (caller holds the lock)."""
        self._snap = snapshot(version, [*self._static.values(), *self._dynamic.values()])

    # --- inspection ---------------------------------------------------------------------

    def hooks(self, kind: str | None = None) -> list[HookDescriptor]:
        """Descriptors in execution order; for one kind, its enabled and disabled hooks."""
        snap = self._snap
        if kind is None:
            return [h.descriptor for h in snap.ordered]
        canonical = self.catalogue.canonical(kind)
        return [h.descriptor for h in snap.ordered if canonical in h.events]

    def observes(self, kind: str) -> bool:
        """Whether an enabled observer hook (``blocking = false``, not ``inline``) watches
        ``kind`` (canonical): its requests' answers are then logged whatever
        ``streams.decision_log`` says, since the observers are fed from the log."""
        return kind in self._snap.observed

    def get(self, hook_id: str) -> HookDescriptor | None:
        hook = self._snap.by_id.get(hook_id)
        return hook.descriptor if hook is not None else None

    def __len__(self) -> int:
        return len(self._snap.ordered)

    def _resolve(self, event: Event) -> tuple[Event, KindSpec]:
        spec = self.catalogue.get(event.kind)
        if spec is None:
            raise UnknownEventKind(event.kind, self.catalogue.kinds())
        if spec.kind != event.kind:
            event = msgspec.structs.replace(event, kind=spec.kind)
        return event, spec

    def matching(self, event: Event) -> list[HookDescriptor]:
        """The enabled hooks whose events and conditions select ``event``, in order."""
        if event.kind not in self._canonical:
            event, _spec = self._resolve(event)
        hooks = self._snap.by_kind.get(event.kind, ())
        return [h.descriptor for h in hooks if h.match is None or h.match(event)]

    # --- running ------------------------------------------------------------------------

    def run(
        self, event: Event, *, time_left_s: float | None = None, blocking: bool | None = None
    ) -> Decision:
        """Run the chain for ``event`` on one snapshot of the hook set.

        Blocking when the kind is blocking, or when it may block and the event is a request
        (``reply_to`` or ``deadline`` set); ``blocking`` overrides. Each hook gets
        min(its timeout, what is left of ``time_left_s``); on error or timeout its
        ``on_error`` decides. Never raises for a hook's failure.
        """
        snap = self._snap
        spec = self._canonical.get(event.kind)
        if spec is None:
            event, spec = self._resolve(event)
        if blocking is None:
            blocking = spec.blocking or (
                spec.may_block and (event.reply_to is not None or event.deadline is not None)
            )
        # a blocking chain leaves the observers out: they see the request as RQ jobs
        hooks = (snap.chain_by_kind if blocking else snap.by_kind).get(event.kind)
        shadow = snap.shadow_by_kind.get(event.kind) if blocking else None
        state = self.fleet_state
        if state is None:
            decision = run_hooks(event, hooks, shadow, blocking, snap.version, time_left_s)
        else:
            with fleet.scope(state, event, time_left_s):
                decision = run_hooks(event, hooks, shadow, blocking, snap.version, time_left_s)
        if blocking:
            decision = self._after_chain(snap, event, decision, time_left_s)
        return decision

    def _after_chain(
        self, snap: Snapshot, event: Event, decision: Decision, time_left_s: float | None
    ) -> Decision:
        """Escalation rules, then the notices due to the event's session."""
        rules = snap.escalate_by_kind.get(event.kind)
        if rules and self.fleet_state is not None:
            selected = [rule for rule, match in rules if match is None or match(event)]
            if selected:
                decision = escalate(self.fleet_state, selected, event, decision, time_left_s)
        if self.notices is not None:
            decision = self.notices.apply(event, decision)
        return decision

    def _find(self, hook_id: str) -> CompiledHook:
        hook = self._snap.by_id.get(hook_id)
        if hook is None:
            raise HookNotFound(hook_id, "this registry")
        return hook

    def run_hook(
        self, hook_id: str, event_or_events: Event | list[Event], *, timeout_s: float | None = None
    ) -> HookRun:
        """Run one hook (an RQ job; a list of events for a batching hook).

        Raises :class:`HookExecutionError` / :class:`HookTimeout` when the hook fails, so
        the job can be retried, and :class:`HookNotFound` when no hook has that id; else
        returns the trace entry. What a hook says besides logs is dropped and noted (these
        runs are infra-only).
        """
        return run_job(self._find(hook_id), event_or_events, timeout_s)

    def run_one(
        self, hook_id: str, event: Event, *, timeout_s: float | None = None
    ) -> tuple[HookResult | None, HookRun]:
        """Run one hook against one event and never raise for its failure: the
        developer's inner loop (``hookbus hooks run``). The result is as the hook answered
        (normalised); the trace entry notes what the chain would drop for this kind."""
        hook = self._find(hook_id)
        event, spec = self._resolve(event)
        return try_hook(hook, event, spec, timeout_s)

    # --- resources ----------------------------------------------------------------------

    def http_client(self, *, guarded: bool = False) -> Any:
        """The shared httpx client of http actions (created on first use); ``guarded``: the
        one of agent-written hooks, which checks every address it dials."""
        with self._lock:
            if guarded:
                if self._guarded_http is None:
                    from hookbus.hooks.actions.egress_client import guarded_client

                    self._guarded_http = guarded_client(self.egress)
                return self._guarded_http
            if self._http is None:
                import httpx

                self._http = httpx.Client(follow_redirects=False)
            return self._http

    def close(self) -> None:
        """Close the shared HTTP clients; the registry stays usable."""
        with self._lock:
            clients = (self._http, self._guarded_http)
            self._http = self._guarded_http = None
        for client in clients:
            if client is not None:
                client.close()
