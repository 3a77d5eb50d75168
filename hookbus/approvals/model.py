"""What a parked request holds, and the decisions made from it.

One Redis hash per parked request (:func:`hookbus.bus.keys.approval_item`), written by
``park.lua`` from :func:`park_fields`: who asked (agent, session, kind, tool and its input
summarised), which hook asked and why, when it was asked and when it expires (Redis's
clock), where the producer waits (its reply key), the chain's decision and the answer to
give should nobody decide. Operators' decisions add who decided, when, and their note.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from hookbus.bus.wire import Approval, ApprovalState, Decision, Event, decode, encode
from hookbus.errors import WireError

#: Longest summary of a tool's input kept on an approval, in characters.
SUMMARY_CHARS = 300
#: Parts of a tool input that say the most, shown first when present.
_TELLING_KEYS = ("command", "file_path", "path", "url", "pattern", "query", "prompt")


def summarise_input(payload: dict[str, Any]) -> tuple[str, str]:
    """(tool name, its input in one short line): the command of a shell call, the path of
    an edit, else the input as compact JSON, cut at :data:`SUMMARY_CHARS`."""
    tool = payload.get("tool_name")
    tool_text = tool if isinstance(tool, str) else ""
    data = payload.get("tool_input")
    if isinstance(data, dict):
        for key in _TELLING_KEYS:
            value = data.get(key)
            if isinstance(value, str) and value:
                return tool_text, _cut(value)
        text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, default=str)
    elif data is None:
        prompt = payload.get("prompt")
        text = prompt if isinstance(prompt, str) else ""
    else:
        text = json.dumps(data, ensure_ascii=False, default=str)
    return tool_text, _cut(text)


def full_input(payload: dict[str, Any]) -> str:
    """The whole tool input (the prompt when there is none), as indented JSON: what the
    operator reads before deciding. The event's own size cap bounds it."""
    data = payload.get("tool_input")
    if data is None:
        prompt = payload.get("prompt")
        return prompt if isinstance(prompt, str) else ""
    if isinstance(data, str):
        return data
    return json.dumps(data, indent=2, ensure_ascii=False, default=str)


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


@dataclass(frozen=True)
class ParkPlan:
    """Everything the worker needs to park one request: the approval's id, its hash fields,
    the first reply (ask, pending) and the expiry answer (the policy, degraded)."""

    approval: str
    expires_ms: int
    first_reply: Decision
    fields: list[tuple[str, bytes | str]]


def plan_park(
    event: Event,
    chain: Decision,
    *,
    approval: str,
    hook: str | None,
    now_ms: int,
    wait_s: int,
    policy: str,
    reply_to: str,
    mode: str,
    worker: str,
    partition: int,
    approvers: int = 1,
    operators: Sequence[str] = (),
    forbid_requester: bool = False,
) -> ParkPlan:
    """The parked request's hash, first reply and expiry answer (built once, by the worker
    that parks it: the sweeper that expires it later only copies bytes)."""
    expires_ms = now_ms + wait_s * 1000
    request_id = chain.request_id or event.request_id or event.id
    first = Decision(
        outcome="ask",
        reason=(
            f"{chain.reason or 'a hook asked'}; waiting for an operator "
            f"(hookbus approvals allow|deny {approval}) up to {wait_s} s"
        ),
        context=chain.context,
        signals=chain.signals,
        trace=chain.trace,
        worker=worker,
        bundle_version=chain.bundle_version,
        request_id=request_id,
        approval=Approval(id=approval, hook=hook, expires_ms=expires_ms, wait_ms=wait_s * 1000),
    )
    expired = Decision(
        outcome="allow" if policy == "allow" else "deny",
        reason=f"no operator decision within {wait_s} s; policy {policy}",
        trace=chain.trace,
        degraded=True,
        worker=worker,
        bundle_version=chain.bundle_version,
        request_id=request_id,
        approval=Approval(id=approval, state="expired", hook=hook, waited_ms=wait_s * 1000),
    )
    tool, summary = summarise_input(event.payload)
    fields: list[tuple[str, bytes | str]] = [
        ("id", approval),
        ("request_id", request_id),
        ("event_id", event.id),
        ("partition", str(partition)),
        ("state", "pending"),
        ("kind", event.kind),
        ("session", event.session_id or ""),
        ("agent", event.agent_id or ""),
        ("tool", tool),
        ("input", summary),
        ("full_input", full_input(event.payload)),
        ("hook", hook or ""),
        ("reason", chain.reason or ""),
        ("asked_ms", str(now_ms)),
        ("expires_ms", str(expires_ms)),
        ("wait_s", str(wait_s)),
        ("policy", "allow" if policy == "allow" else "deny"),
        ("reply_to", reply_to),
        ("mode", mode),
        ("worker", worker),
        ("bundle", chain.bundle_version or ""),
        ("approvers", str(approvers)),
        ("operators", "\n".join(operators)),
        # the operator identity that may not answer: the asking agent's own, when forbidden
        ("requester", f"operator:{event.agent_id}" if forbid_requester and event.agent_id else ""),
        ("allowed_by", ""),
        ("d", encode(chain)),
        ("x", encode(expired)),
    ]
    return ParkPlan(approval=approval, expires_ms=expires_ms, first_reply=first, fields=fields)


@dataclass(frozen=True)
class ApprovalItem:
    """One approval as the inbox reads it back (the hash, decoded)."""

    id: str
    request_id: str
    partition: int
    state: str
    kind: str
    session: str
    agent: str
    tool: str
    input: str
    hook: str
    reason: str
    asked_ms: int
    expires_ms: int
    wait_s: int
    policy: str
    reply_to: str
    worker: str
    decided_by: str = ""
    decided_ms: int = 0
    note: str = ""
    outcome: str = ""
    #: the whole tool input (an approval parked by an older worker has only ``input``)
    full_input: str = ""
    #: how many different operators must allow it, who may answer (empty: anyone), and
    #: who has allowed it so far
    approvers: int = 1
    operators: tuple[str, ...] = ()
    allowed_by: tuple[str, ...] = ()

    @classmethod
    def from_hash(cls, raw: dict[bytes, bytes]) -> ApprovalItem:
        """Decode an HGETALL reply (raises :class:`WireError` for a hash that is not one)."""
        data = {k.decode(): v for k, v in raw.items() if k not in (b"d", b"x")}

        def text(name: str) -> str:
            return data.get(name, b"").decode(errors="replace")

        def number(name: str) -> int:
            try:
                return int(data.get(name, b"0") or b"0")
            except ValueError:
                return 0

        if "id" not in data or "state" not in data:
            raise WireError("not an approval hash (no id or state)", field="$")
        return cls(
            id=text("id"),
            request_id=text("request_id"),
            partition=number("partition"),
            state=text("state"),
            kind=text("kind"),
            session=text("session"),
            agent=text("agent"),
            tool=text("tool"),
            input=text("input"),
            hook=text("hook"),
            reason=text("reason"),
            asked_ms=number("asked_ms"),
            expires_ms=number("expires_ms"),
            wait_s=number("wait_s"),
            policy=text("policy"),
            reply_to=text("reply_to"),
            worker=text("worker"),
            decided_by=text("decided_by"),
            decided_ms=number("decided_ms"),
            note=text("note"),
            outcome=text("outcome"),
            full_input=text("full_input") or text("input"),
            approvers=max(number("approvers"), 1),
            operators=tuple(n for n in text("operators").split("\n") if n),
            allowed_by=tuple(n for n in text("allowed_by").split("\n") if n),
        )

    @property
    def waited_ms(self) -> int | None:
        """How long the request waited for its decision (None while pending)."""
        return self.decided_ms - self.asked_ms if self.decided_ms else None

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json`` and the console's API (reply key left out)."""
        out = asdict(self)
        out.pop("reply_to")
        out["waited_ms"] = self.waited_ms
        return out


def operator_decision(
    chain: Decision, item: ApprovalItem, *, outcome: str, who: str, note: str, waited_ms: int
) -> Decision:
    """The final answer an operator's allow / deny gives: the chain's trace and context,
    the operator's outcome and note, and the approval (who, how long it waited)."""
    verb: ApprovalState = "allowed" if outcome == "allow" else "denied"
    reason = f"{verb} by {who}" + (f": {note}" if note else "")
    return Decision(
        outcome="allow" if outcome == "allow" else "deny",
        reason=reason,
        updated=chain.updated if outcome == "allow" else {},
        context=chain.context,
        signals=chain.signals,
        trace=chain.trace,
        worker=chain.worker,
        bundle_version=chain.bundle_version,
        request_id=item.request_id,
        approval=Approval(
            id=item.id, state=verb, hook=item.hook or None, decided_by=who, waited_ms=waited_ms
        ),
    )


def chain_decision(raw: bytes | None) -> Decision:
    """The chain's decision stored on the approval (an empty one if it cannot be read)."""
    if not raw:
        return Decision(outcome="ask")
    try:
        return decode(raw, Decision)
    except WireError:
        return Decision(outcome="ask")
