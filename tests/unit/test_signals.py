"""Setting a stop event from a signal handler never waits for a lock its own thread holds."""

from __future__ import annotations

import signal
import threading
import time

from hookbus.workers.fleet.signals import StopEvent, graceful_signals, set_soon


def test_set_soon_returns_while_this_thread_holds_the_event_lock() -> None:
    event = threading.Event()
    # the state a signal handler can interrupt: Event.wait re-taking its lock
    with event._cond:  # type: ignore[attr-defined]
        started = time.monotonic()
        set_soon(event)
        assert time.monotonic() - started < 0.5
        assert not event.is_set()
    assert event.wait(5)


def test_a_stop_event_is_set_at_once_while_this_thread_holds_its_lock() -> None:
    event = StopEvent()
    with event._reentrant:
        set_soon(event)
        assert event.is_set()
    assert event.wait(0)


def test_a_stop_event_wakes_a_waiting_thread_and_times_out_like_an_event() -> None:
    event = StopEvent()
    assert event.wait(0.01) is False
    woke: list[bool] = []
    waiter = threading.Thread(target=lambda: woke.append(event.wait(5)))
    waiter.start()
    time.sleep(0.05)
    event.set()
    waiter.join(5)
    assert woke == [True]
    event.clear()
    assert not event.is_set()


def test_the_stop_a_signal_asked_for_is_seen_the_moment_its_handler_returns() -> None:
    """A worker checks its stop right after making its RQ worker: a stop set later, from
    another thread, would let that worker start with the signal already spent."""
    for _ in range(50):
        stop = StopEvent()
        with graceful_signals(stop):
            signal.raise_signal(signal.SIGTERM)
            assert stop.is_set()
