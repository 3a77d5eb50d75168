"""The worker loops' wait after a Redis error: random, growing, capped, reset by a success."""

from __future__ import annotations

from hookbus.workers.fleet.backoff import Backoff


def test_waits_stay_between_the_floor_and_the_cap() -> None:
    backoff = Backoff(initial_s=0.05, max_s=2.0)
    waits = [backoff.next_s() for _ in range(50)]
    assert all(0.025 <= w <= 2.0 for w in waits)
    assert max(waits[-10:]) > 0.5  # grown toward the cap


def test_waits_are_jittered_so_a_fleet_does_not_retry_in_step() -> None:
    firsts = set()
    for _ in range(20):
        backoff = Backoff(initial_s=0.05, max_s=2.0)
        for _ in range(6):
            wait = backoff.next_s()
        firsts.add(round(wait, 4))
    assert len(firsts) > 5


def test_a_success_starts_the_waits_over() -> None:
    backoff = Backoff(initial_s=0.05, max_s=2.0)
    for _ in range(20):
        backoff.next_s()
    backoff.reset()
    assert backoff.next_s() <= 0.05
