"""A hook's fleet-wide rules at run time: its ``[limit]``, ``[lock]`` and ``[escalate]``.

:class:`HookRules` wraps a hook's compiled action. Before the action runs, the lock is taken
(or its holder named) and the request counted against the limit, each one script call
(:mod:`hookbus.state.store`); past the limit or while another session holds the lock the
hook answers the declared outcome with a reason naming the rule, without running the action.
A lock is held by an agent's session (the same session id sent by another agent is another
session) and released by that session's next event of a ``release_on`` kind (the hook is
registered for those kinds too), and at the latest by its TTL.

:func:`escalate` runs after the chain: an agent's session (or the agent) refused ``after``
times within ``within`` is answered ``then`` (halt), on Redis's clock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hookbus.bus.wire import Decision, Event, HookResult
from hookbus.state.sessions import event_session
from hookbus.state.store import FleetState, escalate_id, limit_id, lock_id
from hookbus.state.templates import format_ms

log = logging.getLogger(__name__)

#: Time a state check may use when the chain gave the hook no deadline, in seconds.
UNBOUNDED_CHECK_S = 0.5


@dataclass(frozen=True)
class LimitRule:
    """``[limit]``: at most ``max_count`` matching requests per ``window_ms`` per key."""

    key: Callable[[Event], str | None]
    template: str
    max_count: int
    window_ms: int
    outcome: str


@dataclass(frozen=True)
class LockRule:
    """``[lock]``: one session at a time holds the key; others get ``outcome``."""

    key: Callable[[Event], str | None]
    template: str
    ttl_ms: int
    release_on: frozenset[str]
    outcome: str


@dataclass(frozen=True)
class EscalateRule:
    """``[escalate]``: ``after`` answers of ``of`` within ``within_ms`` per subject → ``then``."""

    hook: str
    after: int
    within_ms: int
    of: str
    per: str
    then: str


class HookRules:
    """The ``call`` of a hook with a limit and/or a lock, around its action's own ``call``."""

    def __init__(
        self,
        hook_id: str,
        inner: Callable[..., Any],
        *,
        state: FleetState | None,
        limit: LimitRule | None,
        lock: LockRule | None,
        acquire_kinds: frozenset[str],
        shadow: bool,
    ) -> None:
        self.hook_id = hook_id
        self.inner = inner
        self.state = state
        self.limit = limit
        self.lock = lock
        self.acquire_kinds = acquire_kinds
        self.shadow = shadow

    def __call__(self, event: Any, timeout: float | None = None, *rest: Any) -> Any:
        state = self.state
        if state is None or not isinstance(event, Event):
            # no fleet state here (``hooks run``, replay): the rules are not checked
            return self.inner(event, timeout, *rest)
        started = time.monotonic()
        budget = UNBOUNDED_CHECK_S if timeout is None else timeout
        lock = self.lock
        releasing = False
        if lock is not None and event.kind in lock.release_on:
            releasing = True
            self._release(state, lock, event, budget)
            if event.kind not in self.acquire_kinds:
                return None
        if event.kind not in self.acquire_kinds:
            return self.inner(event, timeout, *rest)
        taken_now: str | None = None
        # a release kind the hook also runs on (its action, its limit) never takes back the
        # lock it has just released
        if lock is not None and not releasing:
            answer, taken_now = self._take(state, lock, event, budget)
            if answer is not None:
                return answer
        if self.limit is not None:
            left = budget - (time.monotonic() - started)
            answer = self._count(state, self.limit, event, left)
            if answer is not None:
                if taken_now is not None:  # a refused request keeps no lock it just took
                    state.release_lock(
                        taken_now,
                        session=event.session_id or "",
                        agent=event.agent_id or "",
                        time_left_s=left,
                    )
                return answer
        if timeout is not None:
            timeout = timeout - (time.monotonic() - started)
        return self.inner(event, timeout, *rest)

    def _take(
        self, state: FleetState, lock: LockRule, event: Event, budget: float
    ) -> tuple[HookResult | None, str | None]:
        key = lock.key(event)
        if key is None or not event.session_id:
            return None, None
        state_id = lock_id(key, shadow=self.shadow)
        check = state.take_lock(
            state_id,
            session=event.session_id,
            agent=event.agent_id or "",
            ttl_ms=lock.ttl_ms,
            time_left_s=budget,
        )
        if check.granted:
            return None, (state_id if check.taken_now else None)
        holder = check.holder
        # the holder's agent and since when, never its session id: another agent could
        # resend it (it would be a session of its own, but nobody needs to learn it)
        who = f"agent {holder.agent!r}" if holder.agent else "a session with no agent id"
        reason = (
            f"lock {key!r} is held by {who} since {_clock(holder.since_ms)} "
            f"(released by its next {'/'.join(sorted(lock.release_on)) or 'event'}, "
            f"or in {format_ms(check.ttl_left_ms)} at the latest)"
        )
        return HookResult(outcome=lock.outcome, reason=reason), None  # type: ignore[arg-type]

    def _release(self, state: FleetState, lock: LockRule, event: Event, budget: float) -> None:
        key = lock.key(event)
        if key is None or not event.session_id:
            return
        state.release_lock(
            lock_id(key, shadow=self.shadow),
            session=event.session_id,
            agent=event.agent_id or "",
            time_left_s=budget,
        )

    def _count(
        self, state: FleetState, limit: LimitRule, event: Event, budget: float
    ) -> HookResult | None:
        key = limit.key(event)
        if key is None:
            return None
        check = state.check_limit(
            limit_id(self.hook_id, key),
            event.id or f"{time.time_ns()}",
            max_count=limit.max_count,
            window_ms=limit.window_ms,
            time_left_s=budget,
        )
        if check.allowed:
            return None
        reason = (
            f"limit {key!r} reached: {check.count} of {limit.max_count} per "
            f"{format_ms(limit.window_ms)}; the next frees up in {format_ms(check.frees_in_ms)}"
        )
        return HookResult(outcome=limit.outcome, reason=reason)  # type: ignore[arg-type]


def _clock(ms: int) -> str:
    return time.strftime("%H:%M:%S UTC", time.gmtime(ms / 1000)) if ms else "an unknown time"


def escalate(
    state: FleetState,
    rules: list[EscalateRule],
    event: Event,
    decision: Decision,
    time_left_s: float | None,
) -> Decision:
    """``decision``, or each rule's ``then`` once its subject reached ``after`` answers of
    ``of`` within the window. Only answers the hooks gave count (a degraded answer, made by
    a policy, does not). A counter that cannot be updated leaves the decision as the chain
    made it: a refusal stays a refusal, and the failure is logged."""
    from hookbus.errors import FleetStateError

    for rule in rules:
        if decision.outcome != rule.of or decision.degraded:
            continue
        # a session is its agent's: another agent's refusals under the same id never count
        subject = event_session(event) if rule.per == "session" else event.agent_id
        if not subject:
            continue
        budget = UNBOUNDED_CHECK_S if time_left_s is None else time_left_s
        try:
            count = state.count(
                escalate_id(rule.hook, subject),
                event.id or f"{time.time_ns()}",
                window_ms=rule.within_ms,
                time_left_s=budget,
            )
        except FleetStateError as exc:
            log.warning("escalation %s not counted: %s", rule.hook, exc.reason)
            continue
        if count >= rule.after:
            decision.reason = (
                f"escalated by {rule.hook!r}: {count} {rule.of} answers for {rule.per} "
                f"{subject!r} within {format_ms(rule.within_ms)} (last: {decision.reason})"
            )
            decision.outcome = rule.then  # type: ignore[assignment]
    return decision
