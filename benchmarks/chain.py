"""The in-process chain's cost: ``HookRegistry.run`` vs a plain loop vs pluggy.

Five matching python hooks that do nothing (return None / continue) are called for one
PreToolUse event by:

* a plain loop over a priority-sorted list of the five functions (the floor);
* ``HookRegistry.run(event)`` (the whole chain: snapshot, match, call, trace, Decision);
* ``HookRegistry.run(event, time_left_s=...)`` (a request with a deadline; code hooks still
  run inline and an overrun is noticed when the hook returns);
* the same with ``isolate=True`` hooks (each call handed to a worker thread so it can be
  abandoned at the deadline): what the thread hand-off costs;
* pluggy 1.x calling five implementations of one hookspec.

Per-hook overhead = (median time of the contender - median time of the plain loop) / 5.
The goal of issue 3 is hookbus's overhead per hook <= pluggy's. Host noise is about ±25 %,
so read the ratios of one run, not absolute numbers across runs.

Run: ``/work/.venv/bin/python benchmarks/chain.py [--rounds 15] [--loops 20000]``
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import pluggy

from hookbus.bus.wire import Event
from hookbus.hooks.registry import HookRegistry

HOOKS = 5


def _make_functions() -> list[Callable[[Any], None]]:
    def make(i: int) -> Callable[[Any], None]:
        def hook(event: Any) -> None:
            return None

        hook.__name__ = f"hook{i}"
        return hook

    return [make(i) for i in range(HOOKS)]


def _time(
    contenders: dict[str, tuple[Callable[[], Any], int]], rounds: int
) -> dict[str, list[float]]:
    """Per-call µs of each contender for each round. Rounds interleave the contenders, so a
    burst of load on the host hits all of them rather than one."""
    for fn, loops in contenders.values():  # warm up
        for _ in range(min(loops, 2000)):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, (fn, loops) in contenders.items():
            started = time.perf_counter()
            for _ in range(loops):
                fn()
            samples[name].append((time.perf_counter() - started) / loops * 1e6)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--loops", type=int, default=20_000)
    parser.add_argument(
        "--deadline-loops", type=int, default=2_000, help="loops of the threaded case"
    )
    args = parser.parse_args()

    functions = _make_functions()
    event = Event(kind="PreToolUse", payload={"tool_name": "Bash", "tool_input": {"command": "ls"}})

    # plain loop: what calling five functions in priority order costs at least
    ordered = tuple(functions)

    def plain() -> None:
        for fn in ordered:
            result = fn(event)
            if result is not None:
                break

    registry = HookRegistry()
    for i, fn in enumerate(functions):
        registry.register(f"h{i}", fn, events="PreToolUse", priority=10 * (i + 1))
    assert registry.run(event).outcome == "allow"

    def hookbus_run() -> None:
        registry.run(event)

    def hookbus_deadline() -> None:
        registry.run(event, time_left_s=5.0)

    isolated = HookRegistry()
    for i, fn in enumerate(functions):
        isolated.register(
            f"h{i}", fn, events="PreToolUse", priority=10 * (i + 1), isolate=True, timeout_s=5.0
        )

    def hookbus_isolated() -> None:
        isolated.run(event, time_left_s=5.0)

    hookspec = pluggy.HookspecMarker("bench")
    hookimpl = pluggy.HookimplMarker("bench")

    class Spec:
        @hookspec
        def pre_tool_use(self, event: Any) -> None:
            """the hook"""

    pm = pluggy.PluginManager("bench")
    pm.add_hookspecs(Spec)
    for fn in functions:
        plugin = type(fn.__name__, (), {"pre_tool_use": hookimpl(staticmethod(fn))})
        pm.register(plugin)
    pm_hook = pm.hook.pre_tool_use

    def pluggy_run() -> None:
        pm_hook(event=event)

    results = _time(
        {
            "plain loop": (plain, args.loops),
            "hookbus run": (hookbus_run, args.loops),
            "pluggy": (pluggy_run, args.loops),
            "hookbus run (deadline)": (hookbus_deadline, args.loops),
            "isolated (threads)": (hookbus_isolated, args.deadline_loops),
        },
        args.rounds,
    )
    base = statistics.median(results["plain loop"])
    print(f"{HOOKS} no-op python hooks, one PreToolUse event; {args.rounds} rounds, median")
    print(f"{'contender':<24}{'µs/run':>10}{'p10':>9}{'p90':>9}{'overhead µs/hook':>19}")
    overhead: dict[str, float] = {}
    for name, samples in results.items():
        med = statistics.median(samples)
        deciles = statistics.quantiles(samples, n=10)
        overhead[name] = (med - base) / HOOKS
        extra = f"{overhead[name]:>19.3f}" if name != "plain loop" else f"{'-':>19}"
        print(f"{name:<24}{med:>10.3f}{deciles[0]:>9.3f}{deciles[-1]:>9.3f}{extra}")
    hb, pg = overhead["hookbus run"], overhead["pluggy"]
    print()
    print(f"run / plain loop:            {statistics.median(results['hookbus run']) / base:.2f}x")
    print(f"pluggy / plain loop:         {statistics.median(results['pluggy']) / base:.2f}x")
    print(f"hookbus overhead / pluggy's: {hb / pg:.2f} (goal <= 1.00)")
    plain_run = statistics.median(results["hookbus run"])
    for name in ("hookbus run (deadline)", "isolated (threads)"):
        print(f"{name + ' / run:':<29}{statistics.median(results[name]) / plain_run:.1f}x")


if __name__ == "__main__":
    main()
