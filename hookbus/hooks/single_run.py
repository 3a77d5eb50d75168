"""Running one hook outside the chain: as an RQ job (:func:`run_job`, which raises so the
job can be retried) and as the developer's inner loop of ``hookbus hooks run``
(:func:`try_hook`, which never raises for the hook's failure and notes what the chain would
drop).
"""

from __future__ import annotations

import time

from hookbus.bus.kinds import KindSpec
from hookbus.bus.wire import Event, HookResult, HookRun
from hookbus.errors import HookExecutionError
from hookbus.hooks.chain import HOOK_FAILURES, STOPPING, error_text, invoke
from hookbus.hooks.compiled import CompiledHook
from hookbus.hooks.permissions import apply_updates
from hookbus.hooks.results import CONTINUE, coerce_result
from hookbus.hooks.runs import dropped_notes


def run_job(
    hook: CompiledHook, event_or_events: Event | list[Event], timeout_s: float | None
) -> HookRun:
    """Run ``hook`` once; raise :class:`HookExecutionError` when it fails."""
    hook_id = hook.id
    timeout = timeout_s if timeout_s is not None else hook.timeout_s
    started = time.perf_counter_ns()
    try:
        raw = hook.call(event_or_events, timeout)
        result = raw if type(raw) is HookResult else coerce_result(raw, hook.id)
    except HookExecutionError:
        raise
    except HOOK_FAILURES as exc:
        raise HookExecutionError(hook_id, error_text(exc)) from exc
    duration = (time.perf_counter_ns() - started) // 1000
    kind = (
        event_or_events[0].kind
        if isinstance(event_or_events, list) and event_or_events
        else getattr(event_or_events, "kind", "")
    )
    notes = [] if result is CONTINUE else dropped_notes(hook, kind, result)
    return HookRun(hook_id=hook_id, outcome=result.outcome, duration_us=duration, notes=notes)


def try_hook(
    hook: CompiledHook, event: Event, spec: KindSpec, timeout_s: float | None
) -> tuple[HookResult | None, HookRun]:
    """Run ``hook`` once against ``event`` (already of canonical kind ``spec``); never raise."""
    hook_id = hook.id
    end = None if timeout_s is None else time.perf_counter() + timeout_s
    result, duration, failed, error = invoke(hook, event, end)
    if failed is not None or result is None:
        return None, HookRun(
            hook_id=hook_id, outcome=failed or "error", duration_us=duration, error=error
        )
    notes: list[str] = []
    perms = hook.perms.get(spec.kind)
    if result is not CONTINUE and perms is not None:
        if spec.blocking or spec.may_block:
            if result.updated:
                apply_updates(event.payload, result.updated, perms, notes)
            if result.context and not perms.context:
                notes.append(f"context would be dropped: {spec.kind} takes none")
            if result.signals and not perms.signals:
                notes.append(f"signals would be dropped: {spec.kind} takes none")
            if result.outcome in STOPPING and result.outcome not in perms.verdicts:
                notes.append(f"{result.outcome} is not allowed for {spec.kind}")
        else:
            notes.extend(dropped_notes(hook, spec.kind, result))
    return result, HookRun(
        hook_id=hook_id, outcome=result.outcome, duration_us=duration, notes=notes
    )
