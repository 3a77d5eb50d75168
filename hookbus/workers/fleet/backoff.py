"""The backoff of the worker loops after a Redis error: tenacity's random exponential wait.

A fleet that lost Redis together must not knock on it together when it comes back, nor
hammer a server that is still down: each retry waits a random time between a floor and an
exponentially growing cap (tenacity's ``wait_random_exponential``, the policy of
:func:`hookbus.bus.connection.retry_policy`). The loops keep their own shape (they serve
between errors and never give up); this gives them that one wait policy.
"""

from __future__ import annotations

import logging

import tenacity

#: Floor and first cap of a wait after an error, in seconds.
BACKOFF_INITIAL_S = 0.05
#: Longest wait between two tries while Redis stays away, in seconds.
BACKOFF_MAX_S = 2.0


class Backoff:
    """Successive waits of one retry loop; :meth:`reset` after a success."""

    def __init__(self, initial_s: float = BACKOFF_INITIAL_S, max_s: float = BACKOFF_MAX_S) -> None:
        self._wait = tenacity.wait_random_exponential(
            multiplier=initial_s, max=max_s, min=initial_s / 2
        )
        self._state = tenacity.RetryCallState(tenacity.Retrying(), None, (), {})

    def next_s(self) -> float:
        """The wait before the next try (each one longer on average, up to the cap)."""
        delay = float(self._wait(self._state))
        self._state.attempt_number += 1
        return delay

    def reset(self) -> None:
        self._state.attempt_number = 1


#: First cap and longest wait between two restarts of a worker that keeps failing, in s.
RESTART_INITIAL_S = 1.0
RESTART_MAX_S = 10.0
#: A worker that served this long before failing starts its backoff afresh, in s.
RESTART_RESET_AFTER_S = 60.0


def failure_class(error: BaseException | None) -> str:
    """What kind of failure ended a worker: ``OOM`` / ``MISCONF`` / ``READONLY`` (Redis
    refuses writes), ``connection`` (Redis away), else the error's type."""
    if error is None:
        return "stopped"
    from hookbus.bus.connection import CONNECTION_ERRORS, write_refusal

    refusal = write_refusal(error)
    if refusal is not None:
        return refusal[0]
    if isinstance(error, CONNECTION_ERRORS):
        return "connection"
    return type(error).__name__


class RestartBackoff:
    """When a worker that keeps failing is restarted: exponential waits with jitter, capped
    at :data:`RESTART_MAX_S`, and one log line per kind of failure.

    A Redis that is up but refuses writes (out of memory, a full disk) answers PING at
    once, so a loop that waits for PING restarts a worker as fast as it fails (thousands of
    times a second). The first failure of a kind is a warning; its repeats are debug lines,
    until another kind comes or the worker served for :data:`RESTART_RESET_AFTER_S`.
    """

    def __init__(self, logger: logging.Logger, what: str) -> None:
        self.log = logger
        self.what = what
        self.restarts = 0
        self._backoff = Backoff(RESTART_INITIAL_S, RESTART_MAX_S)
        self._last_class: str | None = None

    def failed(self, error: BaseException | None, served_s: float) -> float:
        """Record a failure after ``served_s`` of service; returns the wait before the next
        start, in seconds."""
        if served_s >= RESTART_RESET_AFTER_S:
            self._backoff.reset()
            self._last_class = None
        kind = failure_class(error)
        delay = self._backoff.next_s()
        self.restarts += 1
        if kind != self._last_class:
            self.log.warning(
                "%s stopped serving (%s: %s); restarting with backoff (up to %g s between "
                "tries; repeats of this failure are logged at DEBUG)",
                self.what,
                kind,
                error,
                RESTART_MAX_S,
            )
        else:
            self.log.debug(
                "%s restart %d in %.2f s (%s: %s)", self.what, self.restarts, delay, kind, error
            )
        self._last_class = kind
        return delay
