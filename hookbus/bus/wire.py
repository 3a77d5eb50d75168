"""Wire types and their codecs.

Everything that crosses Redis is one of these msgspec Structs, sent as msgpack. Encoders
and decoders are built once at module level (cheap, no I/O) and reused: msgspec's own advice,
and several times faster per event than json (docs/performance.md).

Schema evolution rules (pinned by the golden-bytes tests in tests/unit/test_wire.py):
new fields get defaults; a field is never renamed, retyped or reused; unknown fields sent
by newer producers are ignored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Literal, TypeAlias, TypeVar

import msgspec

# the id minter lives in bus.ids (stdlib only, shared with the per-event hook); these
# names stay importable from here, where every wire timestamp and id is described
from hookbus.bus.ids import new_id as new_id
from hookbus.bus.ids import new_request_id as new_request_id
from hookbus.bus.ids import now_ms as now_ms
from hookbus.errors import InvalidPayload, WireError

Outcome = Literal["continue", "deny", "ask", "halt"]
"""What one hook says: go on, or stop the chain with deny / ask / halt."""

Verdict = Literal["allow", "deny", "ask", "halt"]
"""What the whole chain (or the failure policy) decides."""

CallerSource = Literal["ai_session", "background_job", "ci_pipeline", "manual_cli"]

Severity = Literal["info", "low", "medium", "high", "critical"]


class Caller(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Who caused the event: an AI session, a background job, CI or a person at a shell."""

    source: CallerSource = "ai_session"
    job_id: str | None = None
    triggered_by: str | None = None


class Event(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One lifecycle event of an agent runtime.

    ``deadline`` (absolute epoch ms), ``reply_to``, ``request_id`` and ``budget_ms`` are set
    only on blocking requests; ``kind`` is canonical once the event has passed
    :func:`hookbus.bus.kinds.resolve`.

    ``request_id`` is fresh for every call (the reply key is built from it and the reply
    carries it back), so an event sent twice never receives the first call's late answer.
    ``budget_ms`` is the time the call had left when it was sent: the worker anchors it to
    Redis's clock (the stream entry id's milliseconds), so clock skew between the producer
    and the worker changes nothing. ``deadline`` (producer clock) is still filled for
    workers that predate ``budget_ms``.
    """

    kind: str
    id: str = msgspec.field(default_factory=new_id)
    session_id: str | None = None
    agent_id: str | None = None
    ts: int = msgspec.field(default_factory=now_ms)
    payload: dict[str, Any] = msgspec.field(default_factory=dict)
    caller: Caller = msgspec.field(default_factory=Caller)
    meta: dict[str, Any] = msgspec.field(default_factory=dict)
    deadline: int | None = None
    reply_to: str | None = None
    request_id: str | None = None
    budget_ms: int | None = None


class HookSignal(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A structured hint a hook emits (routing_hint, normalized_intent, ability_guard...)."""

    kind: str
    code: str | None = None
    severity: Severity = "info"
    payload: dict[str, Any] = msgspec.field(default_factory=dict)


class HookResult(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What one hook returns. ``updated`` holds payload keys to change, ``context`` text to
    add to the agent's context."""

    outcome: Outcome = "continue"
    reason: str | None = None
    updated: dict[str, Any] = msgspec.field(default_factory=dict)
    context: list[str] = msgspec.field(default_factory=list)
    signals: list[HookSignal] = msgspec.field(default_factory=list)
    logs: list[str] = msgspec.field(default_factory=list)


class HookRun(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One entry of a decision's trace: which hook ran, what it said, how long it took.

    ``outcome`` is ``"error"`` or ``"timeout"`` when the hook failed (then ``error`` says
    why and its ``on_error`` decided), ``"skipped"`` when the chain stopped before it.
    ``notes`` records what the chain dropped (changes outside ``modify.allow_keys``...).
    """

    hook_id: str
    outcome: str
    duration_us: int = 0
    error: str | None = None
    notes: list[str] = msgspec.field(default_factory=list)


class ShadowRun(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What a shadow hook (``mode = "shadow"`` in its manifest) would have decided.

    Recorded on the decision, never applied: ``outcome`` is ``continue`` / ``deny`` /
    ``ask`` / ``halt`` as the hook answered, ``error`` or ``timeout`` when it failed (then
    ``reason`` says why), ``skipped`` when the enforcing chain left no time to run it.
    """

    hook: str
    outcome: str
    reason: str | None = None
    duration_us: int = 0


ApprovalState = Literal["pending", "allowed", "denied", "expired"]
"""Where a parked request stands: waiting for an operator, decided, or expired unanswered."""


class Approval(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A request parked for an operator (a hook answered ``ask`` and routes to the operator).

    The first reply of a parked request carries ``state = "pending"``, its ``id`` in the
    namespace's approval inbox, when it expires (``expires_ms``, Redis's clock) and how long
    the producer should wait from now (``wait_ms``). The final reply carries the decided
    state, who decided (``decided_by``: ``operator:<name>``) and how long the request waited
    (``waited_ms``). A producer that predates this field reads the first reply as ``ask``.
    """

    id: str
    state: ApprovalState = "pending"
    hook: str | None = None
    expires_ms: int | None = None
    wait_ms: int | None = None
    decided_by: str | None = None
    waited_ms: int | None = None


class Decision(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The answer to a blocking request: from the chain, or from a failure policy when
    ``degraded`` is true (then ``reason`` says what went wrong in plain words)."""

    outcome: Verdict = "allow"
    reason: str | None = None
    updated: dict[str, Any] = msgspec.field(default_factory=dict)
    context: list[str] = msgspec.field(default_factory=list)
    signals: list[HookSignal] = msgspec.field(default_factory=list)
    trace: list[HookRun] = msgspec.field(default_factory=list)
    degraded: bool = False
    worker: str | None = None
    bundle_version: str | None = None
    request_id: str | None = None
    #: What the shadow hooks would have decided (recorded, never applied).
    shadow: list[ShadowRun] = msgspec.field(default_factory=list)
    #: Set when the request was parked for an operator (see :class:`Approval`).
    approval: Approval | None = None

    @property
    def parked(self) -> bool:
        """Whether this is the first reply of a parked request: the final one follows."""
        return self.approval is not None and self.approval.state == "pending"


# --- codecs ---------------------------------------------------------------------------

_T = TypeVar("_T")

_msgpack_encoder = msgspec.msgpack.Encoder()
_json_encoder = msgspec.json.Encoder()

_msgpack_decoders: dict[type[Any], msgspec.msgpack.Decoder[Any]] = {
    t: msgspec.msgpack.Decoder(t)
    for t in (Event, Caller, HookSignal, HookResult, HookRun, ShadowRun, Approval, Decision)
}
_json_decoders: dict[type[Any], msgspec.json.Decoder[Any]] = {
    t: msgspec.json.Decoder(t)
    for t in (Event, Caller, HookSignal, HookResult, HookRun, ShadowRun, Approval, Decision)
}

_PATH_RE = re.compile(r"`(\$[^`]*)`")
_MISSING_RE = re.compile(r"missing required field `([^`]+)`")


def _wire_error(exc: msgspec.DecodeError, type_name: str) -> WireError:
    """Turn msgspec's message into one that names the failing field as a ``$.path``."""
    text = str(exc)
    field: str | None = None
    missing = _MISSING_RE.search(text)
    path = _PATH_RE.search(text)
    if missing:
        prefix = path.group(1) if path else "$"
        field = f"{prefix}.{missing.group(1)}"
    elif path:
        field = path.group(1)
    where = f" (field {field})" if field else ""
    return WireError(f"invalid {type_name}{where}: {text}", field=field)


def encode(obj: msgspec.Struct) -> bytes:
    """Encode a wire struct as msgpack."""
    return _msgpack_encoder.encode(obj)


def decode(data: bytes, type_: type[_T]) -> _T:
    """Decode msgpack bytes into ``type_``; raises :class:`WireError` naming the field."""
    try:
        return _msgpack_decoders[type_].decode(data)  # type: ignore[no-any-return]
    except msgspec.DecodeError as exc:
        raise _wire_error(exc, type_.__name__) from exc


def encode_json(obj: Any) -> bytes:
    """Encode a struct (or plain data) as JSON: for shell hooks, HTTP hooks and the CLI."""
    return _json_encoder.encode(obj)


def decode_json(data: bytes | str, type_: type[_T]) -> _T:
    """Decode JSON into ``type_``; raises :class:`WireError` naming the field."""
    try:
        return _json_decoders[type_].decode(data)  # type: ignore[no-any-return]
    except msgspec.DecodeError as exc:
        raise _wire_error(exc, type_.__name__) from exc


def to_builtins(obj: Any) -> Any:
    """Plain dicts and lists, for printing and for hooks that take a dict."""
    return msgspec.to_builtins(obj)


# --- payload limits -------------------------------------------------------------------

#: Deepest nesting of objects and arrays an event's payload (or meta) may have; the payload
#: itself is level 1. Far below the recursion limits of msgspec and of the hooks' own code.
MAX_PAYLOAD_DEPTH = 64
#: Most object keys an event's payload (or meta) may hold, counted over every level.
MAX_PAYLOAD_KEYS = 10_000
#: The integer range msgpack can carry.
_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1
_SCALARS = (str, int, float, type(None))


def check_payload(
    value: object,
    *,
    field: str = "payload",
    max_depth: int = MAX_PAYLOAD_DEPTH,
    max_keys: int = MAX_PAYLOAD_KEYS,
) -> None:
    """Raise :class:`InvalidPayload` unless ``value`` is a JSON object hookbus can carry.

    Hooks receive the payload as a dict (python), as JSON (shell, HTTP) and as msgpack on the
    wire, so only JSON's types pass: objects with string keys, arrays, strings, numbers in
    msgpack's range, booleans and null. Depth and key count are bounded here, at the
    producer, so a bad payload is refused with a clear message instead of surfacing as a
    raw TypeError / OverflowError / RecursionError, or poisoning a worker's decoder. The
    walk is iterative: a payload nested 10,000 deep is refused, not a stack overflow.
    """
    if not isinstance(value, dict):
        raise InvalidPayload(field, f"must be a JSON object (a dict), not {type(value).__name__}")
    if not value:
        return
    keys = 0
    # (node, depth, where): ``where`` is a linked (parent, key) chain, turned into a
    # ``$.a[0].b`` path only for the error message (no string work per value)
    stack: list[tuple[Any, int, _Where]] = [(value, 1, None)]
    while stack:
        node, depth, where = stack.pop()
        if depth > max_depth:
            raise InvalidPayload(field, f"nested deeper than {max_depth} levels at {_path(where)}")
        items: Iterable[tuple[str | int, Any]]
        if isinstance(node, dict):
            keys += len(node)
            if keys > max_keys:
                raise InvalidPayload(field, f"more than {max_keys} keys")
            for key in node:
                if type(key) is not str and not isinstance(key, str):
                    raise InvalidPayload(field, f"key {key!r} at {_path(where)} is not a string")
            items = node.items()
        else:
            items = enumerate(node)
        for key, item in items:
            kind = type(item)
            if kind is str or kind is float or kind is bool or item is None:
                continue
            if kind is dict or kind is list or isinstance(item, dict | list | tuple):
                stack.append((item, depth + 1, (where, key)))
            elif not isinstance(item, _SCALARS) or (
                isinstance(item, int) and not _INT_MIN <= item <= _INT_MAX
            ):
                raise InvalidPayload(field, _bad_value(item, _path((where, key))))


_Where: TypeAlias = "tuple[_Where, str | int] | None"


def _path(where: _Where) -> str:
    parts: list[str] = []
    while where is not None:
        where, key = where
        parts.append(f"[{key}]" if type(key) is int else f".{key}")
    return "$" + "".join(reversed(parts))


def _bad_value(item: object, where: str) -> str:
    if isinstance(item, int):
        return f"the integer at {where} is outside msgpack's range (-2**63 .. 2**64-1)"
    return (
        f"the value at {where} is a {type(item).__name__}; use JSON types "
        "(object, array, string, number, boolean, null)"
    )
