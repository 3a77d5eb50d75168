"""The adapters' plain-Python msgpack speaks the bus's wire: msgspec reads what it writes,
and it reads what msgspec writes (events one way, decisions the other)."""

from __future__ import annotations

import math
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookbus.bus.wire import Decision, Event, HookRun, HookSignal, decode, encode
from hookbus.harnesses.lean import msgpack as lean_msgpack
from hookbus.harnesses.lean.msgpack import MsgpackError, packb, unpackb

json_like = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=300),
    lambda children: (
        st.lists(children, max_size=20)
        | st.dictionaries(st.text(max_size=40), children, max_size=20)
    ),
    max_leaves=60,
)


@given(json_like)
def test_msgspec_decodes_whatever_the_lean_codec_encodes(value: Any) -> None:
    assert msgspec.msgpack.decode(packb(value)) == value


@given(json_like)
def test_the_lean_codec_decodes_whatever_msgspec_encodes(value: Any) -> None:
    assert unpackb(msgspec.msgpack.encode(value)) == value


@given(st.binary(max_size=70_000))
def test_bytes_round_trip_as_msgpack_bin(value: bytes) -> None:
    assert unpackb(packb(value)) == value
    assert msgspec.msgpack.decode(packb(value)) == value


@pytest.mark.parametrize("size", [0, 15, 16, 65_535, 65_536])
def test_containers_of_every_header_size_round_trip(size: int) -> None:
    as_list = list(range(size))
    as_map = {str(i): i for i in range(size)}
    assert unpackb(packb(as_list)) == as_list
    assert msgspec.msgpack.decode(packb(as_map)) == as_map


def test_an_event_built_by_the_adapter_decodes_as_the_bus_event() -> None:
    sent = {
        "kind": "PreToolUse",
        "id": "0190aabbccdd0011223344556677",
        "session_id": "sess-1",
        "ts": 1_700_000_000_000,
        "payload": {"tool_name": "Bash", "tool_input": {"command": "ls", "timeout": 1.5}},
        "caller": {"source": "ai_session"},
        "meta": {"harness": "claude-code", "cwd": "/work"},
        "deadline": 1_700_000_000_250,
        "reply_to": "hookbus:{ns}:rep:abc",
    }
    event = decode(packb(sent), Event)
    assert event.kind == "PreToolUse"
    assert event.session_id == "sess-1"
    assert event.payload["tool_input"] == {"command": "ls", "timeout": 1.5}
    assert event.caller.source == "ai_session"
    assert event.deadline == 1_700_000_000_250
    assert event.reply_to == "hookbus:{ns}:rep:abc"


def test_a_decision_from_the_bus_decodes_field_for_field() -> None:
    decision = Decision(
        outcome="deny",
        reason="refused: rm -rf ~",
        updated={"tool_input": {"command": "ls"}},
        context=["one", "two"],
        signals=[HookSignal(kind="ability_guard", code="x", severity="high")],
        trace=[HookRun(hook_id="guard", outcome="deny", duration_us=12)],
        degraded=True,
        worker="w1",
        request_id="r1",
    )
    plain = unpackb(encode(decision))
    assert plain == msgspec.to_builtins(decision)


def test_garbage_is_a_msgpack_error_never_another_exception() -> None:
    for data in (b"", b"\xc1", b"\xd9\x05ab", b"\x92\x01", b"\xcb\x00", b"\x01\x02"):
        with pytest.raises(MsgpackError):
            unpackb(data)


def test_values_outside_msgpack_are_refused() -> None:
    with pytest.raises(MsgpackError):
        packb(2**64)
    with pytest.raises(MsgpackError):
        packb({1, 2})


def test_nan_and_infinity_survive_as_floats() -> None:
    assert math.isnan(unpackb(packb(float("nan"))))  # type: ignore[arg-type]
    assert unpackb(packb(float("inf"))) == float("inf")
    assert lean_msgpack.unpackb(msgspec.msgpack.encode(-0.5)) == -0.5
