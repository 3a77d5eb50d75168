"""The producer's backlog gate: when it looks at a stream's length, and when it refuses."""

from __future__ import annotations

import time

import pytest

from hookbus.bus.policy import backlog as backlog_gate
from hookbus.bus.policy.backlog import BacklogGate


def test_a_new_gate_looks_first_and_refuses_nothing() -> None:
    gate = BacklogGate("s", 100, "event", "streams.events_maxlen")
    assert gate.refusal() is None
    assert gate.check() == ("XLEN", "s")


def test_it_looks_again_after_adding_half_the_room_it_saw() -> None:
    gate = BacklogGate("s", 100, "event", "streams.events_maxlen")
    gate.check()
    gate.take(40)  # room for 60
    gate.added(29)
    assert gate.check() is None
    gate.added(1)  # 30: half the room
    assert gate.check() == ("XLEN", "s")


def test_at_its_limit_it_refuses_and_looks_again_every_tenth_of_a_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gate = BacklogGate("hookbus:{ns}:events", 100, "event", "streams.events_maxlen")
    gate.check()
    gate.take(100)
    refusal = gate.refusal()
    assert refusal is not None
    assert "holds 100 events" in refusal and "streams.events_maxlen = 100" in refusal
    assert "fan-out dispatcher" in refusal
    assert gate.check() is None
    monkeypatch.setattr(backlog_gate, "CHECK_FULL_EVERY_S", 0.0)
    assert gate.refusal() is None  # due for a look: this add goes through with it
    assert gate.check() == ("XLEN", "hookbus:{ns}:events")
    gate.take(10)  # drained
    monkeypatch.setattr(backlog_gate, "CHECK_FULL_EVERY_S", 0.1)
    assert gate.refusal() is None


def test_an_xlen_redis_refuses_makes_it_wait_long_before_trying_again() -> None:
    gate = BacklogGate("s", 100, "request", "streams.requests_maxlen")
    gate.check()
    gate.take(Exception("NOPERM this user has no permissions to run the 'xlen' command"))
    assert gate.refusal() is None
    assert gate.check() is None  # not one XLEN per request to a Redis that refuses it
    assert backlog_gate.CHECK_REFUSED_EVERY_S >= 10


def test_under_its_limit_it_looks_at_least_every_second(monkeypatch: pytest.MonkeyPatch) -> None:
    gate = BacklogGate("s", 1_000_000, "request", "streams.requests_maxlen")
    gate.check()
    gate.take(0)
    assert gate.check() is None
    monkeypatch.setattr(backlog_gate, "CHECK_EVERY_S", 0.01)
    time.sleep(0.02)
    assert gate.check() == ("XLEN", "s")
