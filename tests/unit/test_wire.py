"""The wire format: golden bytes pin it, round trips cover every type, errors name fields."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookbus.bus.wire import (
    Approval,
    Caller,
    Decision,
    Event,
    HookResult,
    HookRun,
    HookSignal,
    ShadowRun,
    decode,
    decode_json,
    encode,
    encode_json,
    new_id,
)
from hookbus.errors import HookBusError, WireError

GOLDEN_EVENT = bytes.fromhex(
    "8aa46b696e64aa507265546f6f6c557365a26964a26531aa73657373696f6e5f6964a27331a86167656e745f"
    "6964a26131a27473cf0000018bcfe56800a77061796c6f616482a9746f6f6c5f6e616d65a442617368aa746f"
    "6f6c5f696e70757481a7636f6d6d616e64a26c73a663616c6c657282a6736f75726365ab63695f706970656c"
    "696e65a66a6f625f6964a26a31a46d65746181a3637764a22f77a8646561646c696e65cf0000018bcfe568fa"
    "a87265706c795f746fa172"
)
GOLDEN_DECISION = bytes.fromhex(
    "8aa76f7574636f6d65a464656e79a6726561736f6ea26e6fa77570646174656481a16101a7636f6e74657874"
    "91a163a77369676e616c739184a46b696e64ad6162696c6974795f6775617264a4636f6465a178a873657665"
    "72697479a468696768a77061796c6f616481a16b01a574726163659184a7686f6f6b5f6964a167a76f757463"
    "6f6d65a464656e79ab6475726174696f6e5f75730ca56e6f74657391a16ea86465677261646564c3a6776f72"
    "6b6572a27731ae62756e646c655f76657273696f6ea27631aa726571756573745f6964a26531"
)
GOLDEN_RESULT = bytes.fromhex(
    "86a76f7574636f6d65a468616c74a6726561736f6ea172a77570646174656481a670726f6d7074a170a7636f"
    "6e7465787491a178a77369676e616c739181a46b696e64ac726f7574696e675f68696e74a46c6f677391a16c"
)

# a blocking request as producers send it since issue 12: request_id and budget_ms added
GOLDEN_REQUEST = bytes.fromhex(
    "88a46b696e64aa507265546f6f6c557365a26964a26531a27473cf0000018bcfe56800a663616c6c657280a8"
    "646561646c696e65cf0000018bcfe568faa87265706c795f746fa172aa726571756573745f6964d920303132"
    "3334353637383961626364656630313233343536373839616263646566a96275646765745f6d73ccfa"
)

# a decision with what a shadow hook would have decided (issue 15 point 3): shadow added
GOLDEN_SHADOW_DECISION = bytes.fromhex(
    "82aa726571756573745f6964a26531a6736861646f779184a4686f6f6ba167a76f7574636f6d65a464656e79"
    "a6726561736f6ea26e6fab6475726174696f6e5f757307"
)

# a request parked for an operator, its first reply and its final one (issue 25): approval
GOLDEN_PARKED_DECISION = bytes.fromhex(
    "83a76f7574636f6d65a361736baa726571756573745f6964a26531a8617070726f76616c84a26964a26131a4"
    "686f6f6ba167aa657870697265735f6d73cf0000018bcfe9fbe0a7776169745f6d73ce000493e0"
)
GOLDEN_OPERATOR_DECISION = bytes.fromhex(
    "82aa726571756573745f6964a26531a8617070726f76616c85a26964a26131a57374617465a7616c6c6f7765"
    "64a4686f6f6ba167aa646563696465645f6279ac6f70657261746f723a616e6ea97761697465645f6d73cd05dc"
)


def golden_parked_decision() -> Decision:
    return Decision(
        outcome="ask",
        request_id="e1",
        approval=Approval(id="a1", hook="g", expires_ms=1700000300000, wait_ms=300000),
    )


def golden_operator_decision() -> Decision:
    return Decision(
        request_id="e1",
        approval=Approval(
            id="a1", state="allowed", hook="g", decided_by="operator:ann", waited_ms=1500
        ),
    )


def golden_request() -> Event:
    return Event(
        kind="PreToolUse",
        id="e1",
        ts=1700000000000,
        deadline=1700000000250,
        reply_to="r",
        request_id="0123456789abcdef0123456789abcdef",
        budget_ms=250,
    )


def golden_event() -> Event:
    return Event(
        kind="PreToolUse",
        id="e1",
        session_id="s1",
        agent_id="a1",
        ts=1700000000000,
        payload={"tool_name": "Bash", "tool_input": {"command": "ls"}},
        caller=Caller(source="ci_pipeline", job_id="j1"),
        meta={"cwd": "/w"},
        deadline=1700000000250,
        reply_to="r",
    )


def golden_decision() -> Decision:
    return Decision(
        outcome="deny",
        reason="no",
        updated={"a": 1},
        context=["c"],
        signals=[HookSignal(kind="ability_guard", code="x", severity="high", payload={"k": 1})],
        trace=[HookRun(hook_id="g", outcome="deny", duration_us=12, notes=["n"])],
        degraded=True,
        worker="w1",
        bundle_version="v1",
        request_id="e1",
    )


def golden_shadow_decision() -> Decision:
    return Decision(
        request_id="e1",
        shadow=[ShadowRun(hook="g", outcome="deny", reason="no", duration_us=7)],
    )


def golden_result() -> HookResult:
    return HookResult(
        outcome="halt",
        reason="r",
        updated={"prompt": "p"},
        context=["x"],
        signals=[HookSignal(kind="routing_hint")],
        logs=["l"],
    )


@pytest.mark.parametrize(
    ("value", "golden"),
    [
        (golden_event(), GOLDEN_EVENT),
        (golden_decision(), GOLDEN_DECISION),
        (golden_result(), GOLDEN_RESULT),
        (golden_request(), GOLDEN_REQUEST),
        (golden_shadow_decision(), GOLDEN_SHADOW_DECISION),
        (golden_parked_decision(), GOLDEN_PARKED_DECISION),
        (golden_operator_decision(), GOLDEN_OPERATOR_DECISION),
    ],
    ids=[
        "event",
        "decision",
        "result",
        "request",
        "shadow-decision",
        "parked-decision",
        "operator-decision",
    ],
)
def test_encoding_matches_the_golden_bytes(value: msgspec.Struct, golden: bytes) -> None:
    assert encode(value) == golden
    assert decode(golden, type(value)) == value


def test_a_request_from_an_older_producer_has_no_request_id_or_budget() -> None:
    old = decode(GOLDEN_EVENT, Event)
    assert (old.request_id, old.budget_ms) == (None, None)
    assert old.deadline == 1700000000250


def test_a_decision_from_an_older_worker_has_no_approval() -> None:
    old = decode(GOLDEN_DECISION, Decision)
    assert old.approval is None
    assert not old.parked


def test_a_parked_first_reply_reads_as_ask_to_a_producer_that_ignores_approval() -> None:
    raw = msgspec.msgpack.decode(GOLDEN_PARKED_DECISION)
    raw.pop("approval")
    assert decode(msgspec.msgpack.encode(raw), Decision).outcome == "ask"
    assert decode(GOLDEN_PARKED_DECISION, Decision).parked


def test_unknown_fields_from_newer_producers_are_ignored() -> None:
    raw = msgspec.msgpack.encode({"kind": "Stop", "id": "x", "ts": 5, "brand_new_field": [1, 2]})
    event = decode(raw, Event)
    assert (event.kind, event.id, event.ts) == ("Stop", "x", 5)


def test_a_missing_field_raises_a_wire_error_naming_it() -> None:
    with pytest.raises(WireError) as info:
        decode(msgspec.msgpack.encode({"id": "x"}), Event)
    assert info.value.field == "$.kind"
    assert isinstance(info.value, HookBusError)


def test_a_mistyped_nested_field_raises_a_wire_error_with_its_path() -> None:
    raw = msgspec.msgpack.encode({"kind": "Stop", "caller": {"source": "martian"}})
    with pytest.raises(WireError) as info:
        decode(raw, Event)
    assert info.value.field == "$.caller.source"


def test_truncated_bytes_raise_a_wire_error() -> None:
    with pytest.raises(WireError):
        decode(GOLDEN_EVENT[:-3], Event)


def test_json_decoding_names_the_field_too() -> None:
    with pytest.raises(WireError) as info:
        decode_json(b'{"outcome": "maybe"}', HookResult)
    assert info.value.field == "$.outcome"


def test_new_ids_are_unique_and_time_sortable() -> None:
    ids = [new_id() for _ in range(1000)]
    assert len(set(ids)) == 1000
    assert ids[0][:12] <= ids[-1][:12]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)
payloads = st.dictionaries(st.text(max_size=10), json_values, max_size=4)
texts = st.text(max_size=30)
opt_texts = st.none() | texts

callers = st.builds(
    Caller,
    source=st.sampled_from(["ai_session", "background_job", "ci_pipeline", "manual_cli"]),
    job_id=opt_texts,
    triggered_by=opt_texts,
)
signals = st.builds(
    HookSignal,
    kind=texts,
    code=opt_texts,
    severity=st.sampled_from(["info", "low", "medium", "high", "critical"]),
    payload=payloads,
)
runs = st.builds(
    HookRun,
    hook_id=texts,
    outcome=texts,
    duration_us=st.integers(0, 2**40),
    error=opt_texts,
    notes=st.lists(texts, max_size=3),
)
shadow_runs = st.builds(
    ShadowRun,
    hook=texts,
    outcome=texts,
    reason=opt_texts,
    duration_us=st.integers(0, 2**40),
)
events = st.builds(
    Event,
    kind=texts,
    id=texts,
    session_id=opt_texts,
    agent_id=opt_texts,
    ts=st.integers(0, 2**50),
    payload=payloads,
    caller=callers,
    meta=payloads,
    deadline=st.none() | st.integers(0, 2**50),
    reply_to=opt_texts,
)
results = st.builds(
    HookResult,
    outcome=st.sampled_from(["continue", "deny", "ask", "halt"]),
    reason=opt_texts,
    updated=payloads,
    context=st.lists(texts, max_size=3),
    signals=st.lists(signals, max_size=3),
    logs=st.lists(texts, max_size=3),
)
decisions = st.builds(
    Decision,
    outcome=st.sampled_from(["allow", "deny", "ask", "halt"]),
    reason=opt_texts,
    updated=payloads,
    context=st.lists(texts, max_size=3),
    signals=st.lists(signals, max_size=3),
    trace=st.lists(runs, max_size=3),
    degraded=st.booleans(),
    worker=opt_texts,
    bundle_version=opt_texts,
    request_id=opt_texts,
    shadow=st.lists(shadow_runs, max_size=2),
)


@given(st.one_of(callers, signals, runs, shadow_runs, events, results, decisions))
def test_every_wire_type_round_trips_through_msgpack_and_json(value: Any) -> None:
    assert decode(encode(value), type(value)) == value
    assert decode_json(encode_json(value), type(value)) == value
