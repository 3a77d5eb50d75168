"""Failure policy: what a blocking request decides when the hooks cannot.

The chain itself handles a failing hook (its ``on_error``). This module covers everything
around the chain: no reply by the deadline, no chain worker alive, Redis unreachable, the
chain crashing inside a worker, an event too large to send. Each yields a
:class:`Decision` with ``degraded=True`` and a reason a person understands on first read,
e.g.
``no chain worker answered within 250 ms; policy deny``.
"""

from __future__ import annotations

from typing import Literal

from hookbus.bus.policy import liveness
from hookbus.bus.wire import Decision

Policy = Literal["allow", "deny"]
Failure = Literal[
    "timeout",
    "no_worker",
    "redis",
    "refused",
    "backlog",
    "bad_reply",
    "chain_error",
    "no_operator",
    "approval_gone",
    "crowded",
    "too_large",
]


def reason_for(
    failure: Failure, policy: Policy, *, deadline_ms: int, detail: str = "", where: str = ""
) -> str:
    """The human reason of a policy decision. ``detail`` adds what the bus said; ``where``
    (:func:`hookbus.bus.policy.liveness.where`: the masked Redis URL and the namespace) says
    where the caller looked, so that one talking to the wrong Redis sees it."""
    if failure == "no_worker":
        text, where = liveness.no_worker(where), ""
    elif failure == "timeout":
        text = liveness.no_answer(deadline_ms)
    elif failure == "redis":
        text = "Redis unreachable"
    elif failure == "refused":
        text = "Redis refused the request"
    elif failure == "backlog":
        text = "the request backlog is full"
    elif failure == "bad_reply":
        text = "the reply could not be decoded"
    elif failure == "no_operator":
        text = f"no operator decision within {deadline_ms // 1000} s"
    elif failure == "approval_gone":
        text = liveness.APPROVAL_GONE
    elif failure == "crowded":
        text = "not put before an operator"
    elif failure == "too_large":
        text = "the event is too large to send"
    else:
        text = "the hook chain failed in the worker"
    notes = "; ".join(part for part in (detail, where) if part)
    if notes:
        text = f"{text} ({notes})"
    return f"{text}; policy {policy}"


def policy_decision(
    failure: Failure,
    policy: Policy,
    *,
    deadline_ms: int,
    request_id: str | None,
    detail: str = "",
    worker: str | None = None,
    where: str = "",
) -> Decision:
    """A degraded decision: ``policy`` decides, ``reason`` says why (and ``where``)."""
    return Decision(
        outcome=policy,
        reason=reason_for(failure, policy, deadline_ms=deadline_ms, detail=detail, where=where),
        degraded=True,
        request_id=request_id,
        worker=worker,
    )
