"""The backoff of the worker loops after a Redis error: tenacity's random exponential wait.

A fleet that lost Redis together must not knock on it together when it comes back, nor
hammer a server that is still down: each retry waits a random time between a floor and an
exponentially growing cap (tenacity's ``wait_random_exponential``, the policy of
:func:`hookbus.bus.connection.retry_policy`). The loops keep their own shape (they serve
between errors and never give up); this gives them that one wait policy.
"""

from __future__ import annotations

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
