"""Run ``hookbus`` with its wall clock shifted by the seconds written in a file.

``python soak_clock.py SKEW_FILE worker --role chain ...``: ``time.time`` / ``time.time_ns``
return the host's time plus the number in ``SKEW_FILE``, re-read at most twice a second, so
a fault can step the clock of a running worker (45 s ahead, then behind) the way an NTP step
or a suspended VM does. The monotonic clock is left alone, as on a real host. Patched
before hookbus is imported, in every process the worker forks.
"""

from __future__ import annotations

import sys
import time

_real_time = time.time
_real_time_ns = time.time_ns
_real_monotonic = time.monotonic
_state = {"next": 0.0, "skew": 0.0}


def _skew(path: str) -> float:
    now = _real_monotonic()
    if now >= _state["next"]:
        _state["next"] = now + 0.5
        try:
            with open(path, encoding="utf-8") as fh:
                _state["skew"] = float(fh.read().strip() or 0)
        except (OSError, ValueError):
            pass
    return _state["skew"]


def main() -> None:
    path = sys.argv[1]
    time.time = lambda: _real_time() + _skew(path)
    time.time_ns = lambda: _real_time_ns() + int(_skew(path) * 1e9)
    sys.argv = ["hookbus", *sys.argv[2:]]
    from hookbus.cli import main as hookbus_main

    hookbus_main()


if __name__ == "__main__":
    main()
