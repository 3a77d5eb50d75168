"""What both producer clients share: configuration, request preparation, the failure
policy and the check that a reply answers this call.

Nothing here does I/O or imports redis-py: ``from hookbus import HookBus`` runs in agents'
per-event processes, and redis-py (which imports its asyncio half too) is loaded only
when a client is built.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Literal

from hookbus.bus import reqrep
from hookbus.bus.keys import Keys, approval_item, fail_policy
from hookbus.bus.kinds import Catalogue, KindSpec
from hookbus.bus.policy.backlog import BacklogGate, Gates
from hookbus.bus.policy.failure import unanswered
from hookbus.bus.policy.guarded import GUARDED_NOTE, FailPolicy
from hookbus.bus.policy.liveness import Liveness, where
from hookbus.bus.policy.timeout import Failure, policy_decision
from hookbus.bus.resp import mask_url
from hookbus.bus.settings.loader import Settings, load_settings
from hookbus.bus.wire import Decision, Event, check_payload
from hookbus.errors import (
    ConfigError,
    EventTooLarge,
    NoWorkerAlive,
    RedisUnavailable,
    RedisWritesRefused,
    RequestTimeout,
    StreamBacklogFull,
    WireError,
)

log = logging.getLogger(__name__)

Policy = Literal["allow", "deny"]

#: Most distinct kind names whose defaults a client caches.
KIND_CACHE_SIZE = 256
#: How long ``publish`` may take before it raises, in seconds (a client option).
PUBLISH_TIMEOUT_S = 1.0
#: How long a producer waits past a parked request's expiry for the fleet's own expiry
#: answer before it applies the policy itself, in seconds.
PARKED_GRACE_S = 1.0
#: How often a parked request checks that its approval still exists in Redis, in seconds.
PARKED_PROBE_S = 1
#: Called with the first reply of a parked request (approval id, expiry), while it waits.
OnParked = Callable[[Decision], None]


def parked_wait_s(decision: Decision) -> float:
    """How long to keep waiting for a parked request's final answer, in seconds."""
    wait_ms = decision.approval.wait_ms if decision.approval is not None else None
    return (wait_ms or 0) / 1000 + PARKED_GRACE_S


#: Pause between two tries of a request the request stream refused as unwritable, in s.
STREAM_RETRY_S = 0.05


def stream_unwritable(exc: BaseException) -> bool:
    """Whether Redis refused an XADD because the stream's ids are exhausted (an explicit
    id poisoned it): the fleet's stream warden moves such a stream aside and recreates it
    within a fraction of a second, so a request tries again while its deadline allows."""
    return "exhausted the last possible ID" in str(exc)


def settings_for(url: str | None, namespace: str | None, settings: Settings | None) -> Settings:
    """``settings`` (or the configuration) with ``url`` / ``namespace`` put over it."""
    if settings is not None:
        if url is None and namespace is None:
            return settings
        import msgspec

        changes: dict[str, Any] = {}
        if url is not None:
            changes["redis_url"] = url
        if namespace is not None:
            changes["namespace"] = namespace
        return msgspec.structs.replace(settings, **changes)
    overrides = {"redis_url": url, "namespace": namespace}
    return load_settings(overrides=overrides).settings


def time_left(end: float) -> float:
    """Seconds until ``end`` (a monotonic time); :class:`RequestTimeout` when none are left."""
    left = end - time.monotonic()
    if left <= 0:
        raise RequestTimeout("deadline passed")
    return left


class ProducerBase:
    """Settings, keys, catalogue, policy decisions and reply checks of one client."""

    settings: Settings
    keys: Keys
    catalogue: Catalogue
    url: str
    publish_timeout_s: float
    where: str
    #: Replies dropped because they answered another call (late, misrouted or forged).
    dropped_replies: int
    #: Policy answers this client gave (flagged ``degraded``), by failure: ``no_worker``,
    #: ``timeout``, ``redis``, ``refused``, ``bad_reply``.
    degraded_answers: Counter[str]

    def _init_common(self, settings: Settings, publish_timeout_s: float) -> None:
        from hookbus.bus.connection import WRITE_PROBE_ID, check_url

        self.settings = settings
        try:
            self.keys = Keys.for_namespace(settings.namespace)
        except ValueError as exc:
            raise ConfigError(f"{exc} (namespace in hookbus.toml or HOOKBUS_NAMESPACE)") from exc
        self.catalogue = settings.catalogue()
        self.url = check_url(settings.effective_redis_url)
        #: where this client looks, as every degraded reason names it
        self.where = where(self.url, settings.namespace)
        if publish_timeout_s <= 0:
            raise ValueError(f"publish_timeout_s must be > 0, got {publish_timeout_s}")
        self.publish_timeout_s = publish_timeout_s
        self.dropped_replies = 0
        self.degraded_answers = Counter()
        self._liveness = Liveness()
        #: What this client knows of its streams' backlogs (see bus/policy/backlog).
        self._gates = Gates()
        #: Where the liveness check's write probe goes (an inbox never created).
        self._write_probe = self.keys.inbox(WRITE_PROBE_ID)
        #: The published failure policy: kinds a guard makes fail closed (read with the
        #: liveness check; :mod:`hookbus.bus.policy.guarded`).
        self.fail_policy = FailPolicy(settings.namespace)
        self.fail_policy_key = fail_policy(settings.namespace)
        # per kind name as given: its spec, default deadline and policy (config lookups
        # normalise names; not something to repeat per request)
        self._kinds: dict[str, tuple[KindSpec, int, Policy]] = {}

    def _prepare(
        self,
        event: Event,
        deadline_ms: int | None,
        on_timeout: Policy | None,
        reply_to: str | None,
    ) -> reqrep.PreparedRequest:
        known = self._kinds.get(event.kind)
        if known is None:
            spec = self.catalogue.resolve(event.kind)
            known = (
                spec,
                self.settings.deadline_ms(spec.kind),
                self.settings.on_timeout_for(spec.kind),
            )
            if len(self._kinds) < KIND_CACHE_SIZE:
                self._kinds[event.kind] = known
        spec, default_deadline_ms, default_policy = known
        return reqrep.prepare_request(
            event,
            spec=spec,
            keys=self.keys,
            budget_ms=deadline_ms,
            default_budget_ms=default_deadline_ms,
            on_timeout=on_timeout,
            default_on_timeout=default_policy,
            reply_to=reply_to,
            max_event_bytes=self.settings.streams.max_event_bytes,
        )

    def unavailable(self, reason: str) -> RedisUnavailable:
        """The error saying this client's Redis (URL masked, namespace) did not answer."""
        return RedisUnavailable(mask_url(self.url), reason, namespace=self.settings.namespace)

    def _check_published(self, event: Event) -> None:
        """Refuse a non-blocking event whose payload or meta cannot travel (see
        :func:`~hookbus.bus.wire.check_payload`), before any I/O."""
        check_payload(event.payload)
        check_payload(event.meta, field="meta")

    def _raise_refusal(self, probe_reply: object) -> None:
        """Raise :class:`RedisWritesRefused` when the write probe's reply is Redis refusing
        writes (OOM, MISCONF, READONLY); any other error of the probe (an ACL without it)
        says nothing about the bus and is ignored."""
        if not isinstance(probe_reply, Exception):
            return
        from hookbus.bus.connection import write_refusal
        from hookbus.bus.settings.loader import mask_url

        refusal = write_refusal(probe_reply)
        if refusal is not None:
            raise RedisWritesRefused(mask_url(self.url), *refusal)

    def _request_gate(self, keys: Keys) -> BacklogGate:
        """The backlog gate of a partition's request stream."""
        return self._gates.requests(keys.requests, self.settings.streams.requests_maxlen)

    def _fail(
        self,
        failure: Failure,
        prepared: reqrep.PreparedRequest,
        *,
        strict: bool,
        detail: str = "",
        cause: BaseException | None = None,
    ) -> Decision:
        """The policy decision for ``failure``, or (strict) the matching error. A kind the
        current bundle guards is denied whatever its configured or requested policy."""
        guarded = self.fail_policy.denies(prepared.event.kind)
        policy = unanswered(prepared.event.kind, prepared.on_timeout, guarded=guarded)
        if guarded and prepared.on_timeout != "deny":
            detail = f"{detail}; {GUARDED_NOTE}" if detail else GUARDED_NOTE
        decision = policy_decision(
            failure,
            "deny" if policy == "deny" else "allow",
            deadline_ms=prepared.deadline_ms,
            request_id=prepared.request_id,
            detail=detail,
            where=self.where,
        )
        if strict:
            if failure == "backlog":
                raise StreamBacklogFull(detail, key=self.keys.requests)
            if failure == "no_worker":
                raise NoWorkerAlive(f"{decision.reason} (strict request {prepared.request_id})")
            if failure in ("refused", "bad_reply") and isinstance(cause, Exception):
                raise cause
            if failure == "redis":
                reason = cause.reason if isinstance(cause, RedisUnavailable) else detail
                raise self.unavailable(reason or "connection failed") from cause
            raise RequestTimeout(f"{decision.reason} (strict request {prepared.request_id})")
        self.degraded_answers[failure] += 1
        # INFO, not WARNING: the caller gets the reason in the decision, and an agent's
        # per-event process without logging config would print warnings on its stderr
        log.info("request %s (%s): %s", prepared.request_id, prepared.event.kind, decision.reason)
        return decision

    def _approval_key(self, parked: Decision) -> str | None:
        """The key of a parked request's approval (it exists until long after a decision),
        None when the reply names none."""
        approval = parked.approval
        if approval is None or not approval.id:
            return None
        try:
            return approval_item(self.settings.namespace, approval.id)
        except ValueError:
            return None

    def _no_operator(
        self,
        prepared: reqrep.PreparedRequest,
        parked: Decision,
        failure: Failure = "no_operator",
    ) -> Decision:
        """The policy answer of a parked request nobody decided (the fleet's own expiry
        answer did not arrive either): degraded, "no operator decision within N s"; or,
        with ``failure="approval_gone"``, one whose approval vanished from Redis."""
        import msgspec

        approval = parked.approval
        wait_ms = approval.wait_ms if approval is not None and approval.wait_ms else 0
        guarded = self.fail_policy.denies(prepared.event.kind)
        policy = unanswered(prepared.event.kind, prepared.on_timeout, guarded=guarded)
        decision = policy_decision(
            failure,
            "deny" if policy == "deny" else "allow",
            deadline_ms=wait_ms,
            request_id=prepared.request_id,
            detail=f"approval {approval.id}" if failure != "no_operator" and approval else "",
            where=self.where,
        )
        if approval is not None:
            decision.approval = msgspec.structs.replace(
                approval, state="expired", waited_ms=wait_ms, expires_ms=None, wait_ms=None
            )
        self.degraded_answers[failure] += 1
        log.info("request %s (%s): %s", prepared.request_id, prepared.event.kind, decision.reason)
        return decision

    def _oversized(self, event: Event, exc: EventTooLarge, *, strict: bool) -> Decision:
        """An event too large to send is a request the fleet cannot answer: a kind the
        current bundle guards gets the degraded deny; any other raises, as before (the
        caller's mistake)."""
        kind = self.catalogue.resolve(event.kind).kind
        if strict or not self.fail_policy.denies(kind):
            raise exc
        self.degraded_answers["too_large"] += 1
        decision = policy_decision(
            "too_large",
            "deny",
            deadline_ms=0,
            request_id=None,
            detail=f"{exc}; {GUARDED_NOTE}",
            where=self.where,
        )
        log.info("request (%s): %s", kind, decision.reason)
        return decision

    def _accept_reply(
        self, reply: Decision | WireError, prepared: reqrep.PreparedRequest, strict: bool
    ) -> Decision | None:
        """The decision of ``reply`` (see :func:`~hookbus.bus.reqrep.decode_reply`); None
        (dropped, logged and counted) when it answers another call; a policy decision when
        it could not be decoded."""
        if isinstance(reply, WireError):
            return self._fail("bad_reply", prepared, strict=strict, detail=str(reply), cause=reply)
        if not reqrep.reply_matches(reply, prepared):
            self.dropped_replies += 1
            log.warning(
                "request %s (%s): dropped a reply for request %s",
                prepared.request_id,
                prepared.event.kind,
                reply.request_id,
            )
            return None
        if self.fail_policy.overrules(prepared.event.kind, reply.outcome, reply.degraded):
            import msgspec

            self.degraded_answers["guarded"] += 1
            log.info(
                "request %s (%s): %s; denied here", prepared.request_id, reply.reason, GUARDED_NOTE
            )
            return msgspec.structs.replace(
                reply, outcome="deny", reason=f"{reply.reason}; {GUARDED_NOTE}"
            )
        return reply
