"""Request/reply protocol helpers and the failure policy: pure code, no server."""

from __future__ import annotations

import time
import uuid

import fakeredis
import pytest

from hookbus.bus import reqrep
from hookbus.bus.keys import Keys
from hookbus.bus.kinds import DEFAULT_CATALOGUE
from hookbus.bus.policy.timeout import policy_decision, reason_for
from hookbus.bus.wire import Decision, Event, decode, now_ms
from hookbus.errors import (
    EventTooLarge,
    InvalidPayload,
    KindCannotBlock,
    UnknownEventKind,
    WireError,
)

KEYS = Keys.for_namespace("proto")


def _prepare(event: Event, **kw: object) -> reqrep.PreparedRequest:
    args: dict[str, object] = {
        "catalogue": DEFAULT_CATALOGUE,
        "keys": KEYS,
        "budget_ms": None,
        "default_budget_ms": 250,
        "on_timeout": None,
        "default_on_timeout": "deny",
        "reply_to": None,
        "max_event_bytes": 1024 * 1024,
    }
    args.update(kw)
    return reqrep.prepare_request(event, **args)  # type: ignore[arg-type]


def test_a_prepared_request_has_a_canonical_kind_a_deadline_and_a_reply_list() -> None:
    before = now_ms()
    prepared = _prepare(Event(kind="before_tool_call", payload={"tool_name": "Bash"}))
    sent = decode(prepared.data, Event)
    assert sent.kind == "PreToolUse"
    assert sent.deadline is not None
    assert before + 250 <= sent.deadline <= now_ms() + 250
    assert sent.request_id is not None and sent.request_id != sent.id
    assert sent.reply_to == KEYS.reply(sent.request_id)
    assert sent.budget_ms == 250
    assert prepared.on_timeout == "deny"
    assert prepared.deadline_ms == 250


def test_every_call_gets_a_fresh_request_id_even_for_the_same_event() -> None:
    event = Event(kind="PreToolUse")
    first, second = _prepare(event), _prepare(event)
    assert first.request_id != second.request_id
    assert uuid.UUID(hex=first.request_id).version == 4
    assert len(first.request_id) == 32
    assert first.event.reply_to != second.event.reply_to
    assert first.event.id == second.event.id == event.id
    assert event.request_id is None  # the caller's event is not changed


def test_a_reply_must_carry_the_call_s_request_id() -> None:
    prepared = _prepare(Event(kind="PreToolUse"))
    assert reqrep.reply_matches(Decision(request_id=prepared.request_id), prepared)
    assert not reqrep.reply_matches(Decision(request_id="someone-else"), prepared)
    assert not reqrep.reply_matches(Decision(), prepared)
    # workers that predate request ids answer under the event's own id
    assert reqrep.reply_matches(Decision(request_id=prepared.event.id), prepared)


def test_the_call_s_deadline_and_policy_win_over_the_defaults() -> None:
    prepared = _prepare(Event(kind="PreToolUse"), budget_ms=40, on_timeout="allow")
    assert prepared.deadline_ms == 40
    assert prepared.on_timeout == "allow"


def test_an_async_request_names_its_producer_inbox_as_reply_key() -> None:
    prepared = _prepare(Event(kind="PreToolUse"), reply_to=KEYS.inbox("p1"))
    assert prepared.event.reply_to == KEYS.inbox("p1")


def test_observe_only_and_unknown_kinds_are_refused_before_sending() -> None:
    with pytest.raises(KindCannotBlock):
        _prepare(Event(kind="SessionEnd"))
    with pytest.raises(UnknownEventKind):
        _prepare(Event(kind="NoSuchKind"))


def test_an_oversize_request_is_refused_before_sending() -> None:
    with pytest.raises(EventTooLarge):
        _prepare(Event(kind="PreToolUse", payload={"x": "y" * 2000}), max_event_bytes=1000)


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        ([1, 2], "must be a JSON object (a dict), not list"),
        ({"n": 2**70}, "the integer at $.n is outside msgpack's range"),
        ({"a": [{"b": object()}]}, "the value at $.a[0].b is a object; use JSON types"),
        ({"s": {1, 2}}, "the value at $.s is a set"),
        ({1: "x"}, "key 1 at $ is not a string"),
        ({"k": b"raw"}, "the value at $.k is a bytes"),
    ],
)
def test_a_payload_that_cannot_travel_is_refused_naming_the_problem(
    payload: object, problem: str
) -> None:
    event = Event(kind="PreToolUse", payload=payload)  # type: ignore[arg-type]
    with pytest.raises(InvalidPayload) as caught:
        _prepare(event)
    assert problem in str(caught.value)
    assert caught.value.field == "payload"


def test_payload_depth_and_key_count_are_bounded() -> None:
    deep: dict[str, object] = {}
    node = deep
    for _ in range(10_000):  # would be a RecursionError in the encoder
        node["a"] = node = {}
    with pytest.raises(InvalidPayload, match="nested deeper than 64 levels"):
        _prepare(Event(kind="PreToolUse", payload=deep))
    ok: dict[str, object] = {}
    node = ok
    for _ in range(63):
        node["a"] = node = {}
    _prepare(Event(kind="PreToolUse", payload=ok))
    many = {f"k{i}": i for i in range(10_001)}
    with pytest.raises(InvalidPayload, match="more than 10000 keys"):
        _prepare(Event(kind="PreToolUse", payload=many))
    with pytest.raises(InvalidPayload, match="invalid event meta"):
        _prepare(Event(kind="PreToolUse", meta={"x": 2**70}))


def test_a_zero_deadline_is_a_usage_error() -> None:
    with pytest.raises(ValueError, match="deadline_ms"):
        _prepare(Event(kind="PreToolUse"), budget_ms=0)


def test_a_request_entry_without_its_event_field_is_a_wire_error() -> None:
    with pytest.raises(WireError):
        reqrep.decode_request({b"x": b"1"})
    with pytest.raises(WireError):
        reqrep.decode_request({reqrep.REQUEST_FIELD: b"\xc1 not msgpack"})


def test_workers_answer_only_reply_keys_of_their_own_namespace() -> None:
    assert reqrep.reply_mode(KEYS, KEYS.reply("abc")) == "l"
    assert reqrep.reply_mode(KEYS, KEYS.inbox("p1")) == "s"
    assert reqrep.reply_mode(KEYS, KEYS.bundle_stamp) == "n"
    assert reqrep.reply_mode(KEYS, Keys.for_namespace("other").reply("abc")) == "n"
    assert reqrep.reply_mode(KEYS, KEYS.reply("")) == "n"
    assert reqrep.reply_mode(KEYS, None) == "n"


@pytest.mark.parametrize("left_s", [0.0, 0.0004, 0.05, 0.25, 1.0, 9.99])
def test_the_server_side_blpop_timeout_is_whole_seconds_past_the_client_deadline(
    left_s: float,
) -> None:
    timeout = reqrep.blpop_timeout_s(left_s)
    assert isinstance(timeout, int)
    assert timeout >= 1
    assert timeout > left_s


def test_the_server_clock_follows_redis_time_not_the_local_clock(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    clock = reqrep.ServerClock(refresh_s=60)
    assert not clock.synced
    clock.refresh(fake_redis)
    assert clock.synced
    assert not clock.due()
    seconds, micros = fake_redis.time()
    assert abs(clock.now_ms() - (seconds * 1000 + micros / 1000)) < 50
    event = Event(kind="PreToolUse", deadline=int(clock.now_ms()) + 100)
    left = clock.time_left_ms(event)
    assert left is not None and 0 < left <= 100
    assert clock.time_left_ms(Event(kind="PreToolUse")) is None


def test_a_time_sample_that_spanned_a_stall_never_moves_the_clock() -> None:
    clock = reqrep.ServerClock()
    server_minus_local_ms = 5_000.0
    for sent in (10.0, 11.0, 12.0):  # quick samples: 0.2 ms round trips
        clock.add_sample(sent, (sent + 0.0001) * 1000 + server_minus_local_ms, sent + 0.0002)
    good = clock.now_ms()
    # sent at 13 s, Redis paused until 15.5 s and then answered: the midpoint is 1.25 s
    # before the answer, so an offset from it would run the clock 1.25 s fast
    clock.add_sample(13.0, 15.5 * 1000 + server_minus_local_ms, 15.5)
    assert abs(clock.now_ms() - good) < 5
    assert clock.best_rtt_ms is not None and clock.best_rtt_ms < 1


def test_the_clock_follows_the_best_of_its_latest_samples_only() -> None:
    clock = reqrep.ServerClock()
    clock.add_sample(1.0, 1000.0 + 7.0, 1.0)  # a perfect sample, offset +7 ms
    for i in range(reqrep.CLOCK_SAMPLES):  # later ones, 2 ms round trips, offset +50 ms
        sent = 2.0 + i
        clock.add_sample(sent, (sent + 0.001) * 1000 + 50.0, sent + 0.002)
    assert clock.best_rtt_ms is not None and 1.9 < clock.best_rtt_ms < 2.1
    offset = clock.now_ms() - time.monotonic() * 1000
    assert 49 < offset < 51


def test_a_skewed_offset_moves_time_left_with_it() -> None:
    clock = reqrep.ServerClock()
    clock._offset_ms = (time.time() - time.monotonic()) * 1000 + 10_000  # server 10 s ahead
    event = Event(kind="PreToolUse", deadline=now_ms() + 5_000)
    left = clock.time_left_ms(event)
    assert left is not None and left < 0


def test_the_reply_script_ships_with_the_package() -> None:
    source = reqrep.reply_script_source()
    assert "XACK" in source and "RPUSH" in source


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        ("timeout", "no chain worker answered within 250 ms; policy deny"),
        ("no_worker", "no chain worker alive (no recent heartbeat); policy deny"),
        ("redis", "Redis unreachable (connection refused); policy deny"),
    ],
)
def test_policy_reasons_read_as_plain_sentences(failure: str, expected: str) -> None:
    detail = "connection refused" if failure == "redis" else ""
    assert reason_for(failure, "deny", deadline_ms=250, detail=detail) == expected  # type: ignore[arg-type]


WHERE = "namespace 'x' at redis://u:***@h:6380/0"


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        ("timeout", f"no chain worker answered within 250 ms ({WHERE}); policy deny"),
        ("no_worker", f"no chain worker alive (no heartbeat in {WHERE}); policy deny"),
        ("redis", f"Redis unreachable (connection refused; {WHERE}); policy deny"),
    ],
)
def test_policy_reasons_name_the_redis_url_masked_and_the_namespace(
    failure: str, expected: str
) -> None:
    from hookbus.bus.policy.liveness import where

    place = where("redis://u:secret@h:6380/0", "x")
    detail = "connection refused" if failure == "redis" else ""
    reason = reason_for(failure, "deny", deadline_ms=250, detail=detail, where=place)  # type: ignore[arg-type]
    assert reason == expected
    assert "secret" not in reason


def test_a_policy_decision_is_degraded_and_carries_the_request_id() -> None:
    decision = policy_decision("timeout", "allow", deadline_ms=100, request_id="r1")
    assert decision.outcome == "allow"
    assert decision.degraded is True
    assert decision.request_id == "r1"
    assert decision.reason == "no chain worker answered within 100 ms; policy allow"


def test_commands_are_packed_as_redis_protocol() -> None:
    from hookbus.bus.resp import pack

    assert pack("XADD", b"k", 5) == b"*3\r\n$4\r\nXADD\r\n$1\r\nk\r\n$1\r\n5\r\n"
    assert pack(b"") == b"*1\r\n$0\r\n\r\n"


def test_a_prepared_request_needs_a_catalogue_or_a_spec() -> None:
    with pytest.raises(TypeError):
        reqrep.prepare_request(
            Event(kind="PreToolUse"),
            keys=KEYS,
            budget_ms=None,
            default_budget_ms=250,
            on_timeout=None,
            default_on_timeout="deny",
            reply_to=None,
            max_event_bytes=1000,
        )
