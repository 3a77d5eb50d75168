"""What an agent-written hook may act on: its author's events, after the operator's hooks,
within a bounded share of the request's time.

* **Scope.** A hook with ``author = "agent:<id>"`` matches only events whose ``agent_id`` is
  ``<id>`` (its author's sessions), on top of its own ``match``. The operator widens it when
  approving (``hookbus hooks approve NAME --scope ID`` / ``--scope '*'``), which writes the
  manifest's ``scope`` list; an agent's own write never carries one (the write spec has no
  such field).
* **Reach.** On an event of another agent (a widened scope), what it answers is cut down:
  a ``halt`` counts as a ``deny`` (it stops that request, never the other agent's session),
  added context, signals and changes to the event (``updated``: a rewritten tool input
  would run the author's command in the other agent's session) are dropped, and its
  reason is replaced by the operator's label (which hook, whose): the author's words would
  reach the other agent's model as an instruction. The words are logged for the operator.
* **Order.** Agents' hooks run after every operator hook, whatever priority they declare
  (:func:`order_key`): an agent cannot put its hook in front of an operator's guard.
* **Time.** Each run gets at most ``security.agent_timeout_secs`` and at most
  ``security.agent_deadline_share`` of the request's time budget (:class:`ScopedCall`); a
  shell hook is killed at that limit, so it never holds a worker longer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from hookbus.bus.wire import Event, HookResult
from hookbus.errors import HookRegistrationError
from hookbus.hooks.actions.sandbox import DEFAULT_AGENT_ENV, env_refusal
from hookbus.hooks.conditions import Predicate
from hookbus.hooks.results import coerce_result

log = logging.getLogger(__name__)

#: Longest part of a cut reason the log keeps, in characters.
LOGGED_REASON_CHARS = 500
#: A scope entry that widens an agent's hook to every agent's events.
EVERY_AGENT = "*"
_AGENT_PREFIX = "agent:"


@dataclass(frozen=True)
class AgentPolicy:
    """The ``[security]`` settings that bound agents' hooks at run time."""

    env_allowlist: tuple[str, ...] = DEFAULT_AGENT_ENV
    timeout_s: float = 5.0
    deadline_share: float = 0.5

    @classmethod
    def from_settings(cls, security: Any) -> AgentPolicy:
        return cls(
            env_allowlist=(*DEFAULT_AGENT_ENV, *security.agent_env_allowlist),
            timeout_s=float(security.agent_timeout_secs),
            deadline_share=float(security.agent_deadline_share),
        )


def author_id(manifest: Any) -> str | None:
    """The agent id of an agent-written manifest (``agent:<id>`` → ``<id>``), else None."""
    author = getattr(manifest, "author", "")
    if isinstance(author, str) and author.startswith(_AGENT_PREFIX):
        return author[len(_AGENT_PREFIX) :]
    return None


def order_key(hook: Any) -> tuple[int, int, int]:
    """Execution order: operator (and static) hooks first, then agents' hooks; by priority,
    then registration order, within each."""
    manifest = getattr(hook.descriptor, "manifest", None)
    return (0 if author_id(manifest) is None else 1, hook.priority, hook.seq)


def describe_scope(manifest: Any) -> str:
    """The scope in words, for ``hookbus hooks list`` and approvals."""
    agent = author_id(manifest)
    if agent is None:
        return "every agent"
    extra = list(getattr(manifest, "scope", []) or [])
    if EVERY_AGENT in extra:
        return "every agent (widened by the operator)"
    if extra:
        return f"its author {agent!r} and {', '.join(repr(x) for x in extra)} (widened)"
    return f"its author {agent!r} only"


def _event_of(arg: Any) -> Event | None:
    if isinstance(arg, list):
        return arg[0] if arg else None
    return arg if isinstance(arg, Event) else None


def scoped_match(match: Predicate | None, manifest: Any) -> Predicate | None:
    """``match`` narrowed to the author's events (and those of the widened scope)."""
    agent = author_id(manifest)
    if agent is None:
        return match
    allowed = frozenset({agent, *(getattr(manifest, "scope", []) or [])})
    if EVERY_AGENT in allowed:
        return match

    def in_scope(event: Event) -> bool:
        if event.agent_id not in allowed:
            return False
        return match is None or match(event)

    return in_scope


class ScopedCall:
    """An agent hook's action, bounded in time and cut down on other agents' events."""

    def __init__(
        self, call: Callable[..., Any], hook_id: str, agent: str, policy: AgentPolicy
    ) -> None:
        self.call = call
        self.hook_id = hook_id
        self.agent = agent
        self.policy = policy

    def bound(self, event: Event | None, timeout: float | None) -> float:
        """The timeout this run gets: the hook's, at most the cap and the share of the
        request's budget."""
        limit = self.policy.timeout_s if timeout is None else min(timeout, self.policy.timeout_s)
        budget = None if event is None else event.budget_ms
        if budget is not None and budget > 0:
            limit = min(limit, budget / 1000.0 * self.policy.deadline_share)
        return limit

    def __call__(self, arg: Any, timeout: float | None, under_deadline: bool = False) -> Any:
        event = _event_of(arg)
        raw = self.call(arg, self.bound(event, timeout), under_deadline)
        if event is None or event.agent_id == self.agent:
            return raw
        return self.cut_down(raw)

    def cut_down(self, raw: Any) -> Any:
        """What the hook may say on another agent's event: no halt, no context, no signals,
        no change to the event, and no words of its own (a reason is what the other agent's
        model reads next)."""
        if raw is None:
            return None
        result = raw if type(raw) is HookResult else coerce_result(raw, self.hook_id)
        outcome = "deny" if result.outcome == "halt" else result.outcome
        reason = result.reason
        if reason is not None:
            log.info(
                "agent hook %s (of agent %s) on another agent's event: its reason %r "
                "replaced by the operator's label",
                self.hook_id,
                self.agent,
                reason[:LOGGED_REASON_CHARS],
            )
            reason = self.label(outcome)
        return msgspec.structs.replace(
            result, outcome=outcome, reason=reason, updated={}, context=[], signals=[]
        )

    def label(self, outcome: str) -> str:
        """The reason another agent's session is given: which hook answered, and whose."""
        verb = {"deny": "refused", "ask": "asks about"}.get(outcome, "answered")
        return (
            f"{verb} by hook {self.hook_id!r}, written by agent {self.agent!r} and widened to "
            "other agents by the operator (its own reason is not passed on)"
        )

    def describe(self) -> str:
        inner = getattr(self.call, "describe", None)
        return inner() if callable(inner) else self.hook_id


def scope_agent_hook(
    manifest: Any,
    call: Callable[..., Any],
    direct: Callable[[Any], Any] | None,
    match: Predicate | None,
    policy: AgentPolicy,
) -> tuple[Callable[..., Any], Callable[[Any], Any] | None, Predicate | None]:
    """(call, direct, match) of a compiled hook, scoped when an agent wrote it (no inline
    fast path then: every run goes through :class:`ScopedCall`)."""
    agent = author_id(manifest)
    if agent is None:
        return call, direct, match
    check_agent_env(manifest, policy)
    return ScopedCall(call, manifest.name, agent, policy), None, scoped_match(match, manifest)


def check_agent_env(manifest: Any, policy: AgentPolicy) -> None:
    """Refuse an agent's hook whose action sets a variable agents may not set (whatever the
    action kind: shell, wake...)."""
    kind = getattr(manifest.action, "kind", None)
    spec = getattr(manifest.action, kind, None) if isinstance(kind, str) else None
    for name in getattr(spec, "env", None) or {}:
        refusal = env_refusal(name, policy.env_allowlist)
        if refusal is not None:
            raise HookRegistrationError(manifest.name, refusal)
