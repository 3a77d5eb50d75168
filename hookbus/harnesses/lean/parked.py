"""Waiting on for a request a hook parked for an operator, in the per-event command.

The first reply of a parked request is ``ask`` with ``approval.state = "pending"`` (see
:class:`hookbus.bus.wire.Approval`). The agent CLI's hook entry allows more time than the
request's own deadline (the installers give parkable entries a timeout above
``approvals.wait_s``), so the command keeps popping the same reply list until the final
answer comes: an operator's decision, or the fleet's expiry answer. If neither comes while
the entry's time lasts, the event's failure policy answers, degraded, the way the fleet
would have.

Stdlib and :mod:`hookbus.bus.resp` only: this runs in the per-event process.
"""

from __future__ import annotations

import time

from hookbus.bus import keys
from hookbus.bus.policy.liveness import APPROVAL_GONE
from hookbus.bus.resp.client import RespTimeout
from hookbus.errors import RedisUnavailable
from hookbus.harnesses.lean.msgpack import MsgpackError, unpackb

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: the per-event path does not import typing
if TYPE_CHECKING:
    from typing import Any

    from hookbus.bus.resp.client import RespConnection
    from hookbus.bus.resp.cluster import ClusterConnection

#: How long past a parked request's expiry to wait for the fleet's expiry answer, in s.
GRACE_S = 1.0
#: Pause between tries while Redis cannot be reached, in seconds.
RETRY_S = 0.5
#: How often the wait checks that the approval still exists in Redis, in seconds.
PROBE_S = 1


def is_parked(decision: dict[str, Any]) -> bool:
    """Whether ``decision`` is the first reply of a parked request."""
    approval = decision.get("approval")
    return isinstance(approval, dict) and approval.get("state", "pending") == "pending"


def wait_for_operator(
    conn: RespConnection | ClusterConnection,
    namespace: str,
    decision: dict[str, Any],
    *,
    end: float,
    policy: str | None,
) -> dict[str, Any]:
    """The final decision of a parked request, popped from its reply list before ``end``
    (a ``time.monotonic()`` instant: the hook entry's own limit), else the policy's."""
    approval = decision.get("approval") or {}
    given = approval.get("wait_ms")
    wait_ms = given if isinstance(given, int) else 0
    request_id = decision.get("request_id")
    if not isinstance(request_id, str) or not request_id:
        return _no_operator(decision, wait_ms, policy)
    started = time.monotonic()
    natural = started + wait_ms / 1000 + GRACE_S
    if end < natural:  # the hook entry ends first: say so, with the time it allowed
        wait_ms = max(int((end - started) * 1000), 0)
        entry_note = " (the hook entry's timeout; install the hooks again for 610 s)"
    else:
        end, entry_note = natural, ""
    reply_key = keys.reply(namespace, request_id)
    probe = _approval_key(namespace, approval.get("id"))
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return _no_operator(decision, wait_ms, policy, entry_note)
        try:
            if probe is not None and left > PROBE_S + 1:  # a second, then: is it still there?
                popped, there = conn.pipeline(
                    [("BLPOP", reply_key, PROBE_S), ("EXISTS", probe)],
                    deadline=time.monotonic() + PROBE_S + 1,
                )
                if popped is None and there == 0:
                    return _no_operator(decision, wait_ms, policy, gone=True)
                if not isinstance(there, int):
                    probe = None  # this Redis user may not look: wait without
                if popped is None:
                    continue
            else:
                (popped,) = conn.pipeline([("BLPOP", reply_key, int(left) + 2)], deadline=end)
        except RespTimeout:
            return _no_operator(decision, wait_ms, policy, entry_note)
        except RedisUnavailable:
            time.sleep(min(RETRY_S, max(end - time.monotonic(), 0.0)))
            continue
        if not isinstance(popped, list) or len(popped) != 2 or not isinstance(popped[1], bytes):
            # an error reply or nothing: try again while time is left
            time.sleep(min(RETRY_S, max(end - time.monotonic(), 0.0)))
            continue
        try:
            final = unpackb(popped[1])
        except MsgpackError:
            continue
        if not isinstance(final, dict) or final.get("request_id") != request_id:
            continue  # not this request's (cannot happen on its own reply list)
        if not is_parked(final):
            return final


def _approval_key(namespace: str, approval_id: object) -> str | None:
    """The key of the approval ``approval_id`` names (None: no readable id)."""
    if not isinstance(approval_id, str):
        return None
    try:
        return keys.approval_item(namespace, approval_id)
    except ValueError:
        return None


def _no_operator(
    decision: dict[str, Any],
    wait_ms: int,
    policy: str | None,
    note: str = "",
    *,
    gone: bool = False,
) -> dict[str, Any]:
    """The policy's answer when nobody decided (``gone``: the approval vanished from
    Redis): degraded, saying so."""
    outcome = "allow" if policy == "allow" else "deny"
    approval = dict(decision.get("approval") or {})
    approval.update(state="expired", waited_ms=wait_ms)
    approval.pop("wait_ms", None)
    approval.pop("expires_ms", None)
    why = f"no operator decision within {wait_ms // 1000} s{note}"
    if gone:
        why = f"{APPROVAL_GONE} (approval {approval.get('id')})"
    return {
        "outcome": outcome,
        "reason": f"{why}; policy {outcome}",
        "degraded": True,
        "request_id": decision.get("request_id"),
        "approval": approval,
    }
