"""The runs of an event's hooks besides the enforcing chain, and which run an event gets.

:func:`run_hooks` picks: a blocking request runs the enforcing chain
(:func:`hookbus.hooks.chain.run_chain`) and then its shadow hooks (:func:`run_with_shadow`:
recorded, never applied); a non-blocking event runs every matching hook
(:func:`run_observe`), whatever one says besides logs dropped with a note.
"""

from __future__ import annotations

import logging
import time

from hookbus.bus.wire import Decision, Event, HookResult, HookRun, ShadowRun
from hookbus.hooks.chain import NO_TIME_LEFT, STOPPING, invoke, run_chain
from hookbus.hooks.compiled import CompiledHook
from hookbus.hooks.results import CONTINUE

logger = logging.getLogger(__name__)


def run_shadow(event: Event, hooks: tuple[CompiledHook, ...], end: float | None) -> list[ShadowRun]:
    """What each matching shadow hook would have decided, recorded and never applied.

    Runs after the enforcing chain, on the event as the agent sent it, each hook within
    min(its timeout, the time the chain left before ``end``); once no time is left the rest
    are recorded as ``skipped`` without running, so shadow hooks never push an answer past
    its deadline. A failure is recorded as ``error`` / ``timeout`` and changes nothing.
    """
    runs: list[ShadowRun] = []
    for hook in hooks:
        if hook.match is not None and not hook.match(event):
            continue
        if end is not None and time.perf_counter() >= end:
            runs.append(ShadowRun(hook=hook.id, outcome="skipped", reason=NO_TIME_LEFT))
            continue
        result, duration, failed, error = invoke(hook, event, end)
        if failed is not None:
            runs.append(ShadowRun(hook=hook.id, outcome=failed, reason=error, duration_us=duration))
            continue
        assert result is not None
        outcome: str = result.outcome
        verdicts = hook.perms[event.kind].verdicts
        if outcome in STOPPING and outcome not in verdicts:
            outcome = "deny" if "deny" in verdicts else "continue"
        runs.append(
            ShadowRun(hook=hook.id, outcome=outcome, reason=result.reason, duration_us=duration)
        )
    return runs


def run_with_shadow(
    event: Event,
    hooks: tuple[CompiledHook, ...],
    shadow: tuple[CompiledHook, ...],
    version: str | None,
    time_left_s: float | None,
) -> Decision:
    """The enforcing chain's decision, then the shadow hooks in the time it left, recorded on
    ``decision.shadow`` (the chain's outcome, changes, context and signals untouched)."""
    end = None if time_left_s is None else time.perf_counter() + time_left_s
    if hooks:
        decision = run_chain(event, hooks, version, time_left_s)
    else:
        decision = Decision(bundle_version=version, request_id=event.id)
    decision.shadow = run_shadow(event, shadow, end)
    return decision


def dropped_notes(hook: CompiledHook, kind: str, result: HookResult) -> list[str]:
    """Notes for what a hook said on an infra-only (non-blocking) event."""
    said = []
    if result.outcome != "continue":
        said.append(f"outcome {result.outcome}")
    if result.updated:
        said.append("changes")
    if result.context:
        said.append("context")
    if result.signals:
        said.append("signals")
    if not said:
        return []
    text = f"dropped {', '.join(said)}: {kind} is non-blocking here (infra-only)"
    if kind not in hook.warned:
        hook.warned.add(kind)
        logger.warning("misconfigured hook %s: %s", hook.id, text)
    return [text]


def run_observe(
    event: Event,
    hooks: tuple[CompiledHook, ...],
    version: str | None,
    time_left_s: float | None,
) -> Decision:
    """Run every matching hook on a non-blocking event: nothing a hook says changes the
    event or stops the others, the answer is always ``allow``, and the trace says what each
    hook said (with a note, and a warning once per hook and kind, when it tried to decide)."""
    end = None if time_left_s is None else time.perf_counter() + time_left_s
    trace: list[HookRun] = []
    for hook in hooks:
        if hook.match is not None and not hook.match(event):
            continue
        result, duration, failed, error = invoke(hook, event, end)
        if failed is not None:
            trace.append(
                HookRun(hook_id=hook.id, outcome=failed, duration_us=duration, error=error)
            )
            continue
        assert result is not None
        notes = [] if result is CONTINUE else dropped_notes(hook, event.kind, result)
        trace.append(
            HookRun(hook_id=hook.id, outcome=result.outcome, duration_us=duration, notes=notes)
        )
    return Decision(outcome="allow", trace=trace, bundle_version=version, request_id=event.id)


def run_hooks(
    event: Event,
    hooks: tuple[CompiledHook, ...] | None,
    shadow: tuple[CompiledHook, ...] | None,
    blocking: bool,
    version: str | None,
    time_left_s: float | None,
) -> Decision:
    """Run one event's hooks the way its kind asks: a blocking request through the chain
    (and its shadow hooks after it), anything else through :func:`run_observe`; no hooks at
    all answer allow."""
    if shadow:
        return run_with_shadow(event, hooks or (), shadow, version, time_left_s)
    if not hooks:
        return Decision(bundle_version=version, request_id=event.id)
    if blocking:
        return run_chain(event, hooks, version, time_left_s)
    return run_observe(event, hooks, version, time_left_s)
