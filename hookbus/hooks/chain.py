"""The chain: running compiled hooks against one event (DESIGN §3). The hot path.

:class:`~hookbus.hooks.registry.HookRegistry` compiles hooks into
:class:`~hookbus.hooks.compiled.CompiledHook` objects (plain attributes, nothing validated
per call) and keeps per-kind tuples of them in execution order; :func:`run_chain`
(blocking kinds) and :func:`run_observe` (non-blocking kinds) walk one such tuple. A sync
python hook that may run inline is called directly, with one clock read per hook; everything
else goes through :func:`invoke`, which applies min(the hook's timeout, the time left) and
turns every failure into a trace entry.
"""

from __future__ import annotations

import logging
import time
from time import perf_counter_ns as perf_ns
from typing import Any

import msgspec

from hookbus.bus.wire import Decision, Event, HookResult, HookRun, ShadowRun, Verdict
from hookbus.errors import HookExecutionError, HookTimeout
from hookbus.hooks.compiled import CompiledHook
from hookbus.hooks.results import CONTINUE, apply_updates, coerce_result

logger = logging.getLogger(__name__)

STOPPING = frozenset({"deny", "ask", "halt"})
_VERDICT: dict[str, Verdict] = {"continue": "allow", "deny": "deny", "ask": "ask", "halt": "halt"}


_NO_TIME_LEFT = "no time left before the request's deadline"

#: What a hook may raise and have counted as its failure. SystemExit is included: a hook
#: calling sys.exit() must fail that hook, not stop the worker serving the whole fleet.
#: KeyboardInterrupt and hookbus's own control-flow signals still propagate.
HOOK_FAILURES: tuple[type[BaseException], ...] = (Exception, SystemExit)


def _overran(hook: CompiledHook, elapsed_ns: int) -> str:
    limit = f"its {hook.timeout_s:.3g}s timeout or " if hook.timeout_s is not None else ""
    return f"took {elapsed_ns / 1e9:.3g}s, past {limit}the request's deadline"


def error_text(exc: BaseException) -> str:
    if isinstance(exc, HookExecutionError):
        return exc.reason
    return f"{type(exc).__name__}: {exc}"


def invoke(
    hook: CompiledHook, event: Any, end: float | None
) -> tuple[HookResult | None, int, str | None, str | None]:
    """(result, duration µs, failure outcome, error text) for one call."""
    started = time.perf_counter_ns()
    try:
        if end is None:
            direct = hook.direct
            if direct is not None and hook.timeout_s is None:
                raw = direct(event)
            else:
                raw = hook.call(event, hook.timeout_s)
        else:
            left = end - time.perf_counter()
            timeout = left if hook.timeout_s is None else min(hook.timeout_s, left)
            if timeout <= 0:
                raise HookTimeout(hook.id, "no time left before the request's deadline")
            raw = hook.call(event, timeout, True)
        result = raw if type(raw) is HookResult else coerce_result(raw, hook.id)
    except HookTimeout as exc:
        return None, (time.perf_counter_ns() - started) // 1000, "timeout", exc.reason
    except HOOK_FAILURES as exc:
        if not isinstance(exc, HookExecutionError):
            logger.warning("hook %s raised %s", hook.id, error_text(exc), exc_info=True)
        return None, (time.perf_counter_ns() - started) // 1000, "error", error_text(exc)
    return result, (time.perf_counter_ns() - started) // 1000, None, None


def _late_reason(late: list[str]) -> str:
    named = ", ".join(repr(h) for h in late)
    return f"hook(s) {named} timed out or were at their concurrency cap; their on_error answered"


def run_chain(
    event: Event,
    hooks: tuple[CompiledHook, ...],
    version: str | None,
    time_left_s: float | None,
) -> Decision:
    end = None if time_left_s is None else time.perf_counter() + time_left_s
    end_ns = None if time_left_s is None else perf_ns() + int(time_left_s * 1e9)
    trace: list[HookRun] = []
    updated: dict[str, Any] = {}
    context: list[str] = []
    signals: list[Any] = []
    kind = event.kind
    mark = perf_ns()  # one clock read per hook: each duration runs from the previous end
    result: HookResult | None
    failed: str | None
    error: str | None
    #: hooks past their timeout or cap: their on_error answered, so the decision is degraded
    late: list[str] = []
    for index, hook in enumerate(hooks):
        if hook.match is not None and not hook.match(event):
            continue
        fast = hook.direct if (hook.inline_free if end is None else hook.inline_deadline) else None
        if fast is not None:
            # the fast path: a sync python hook called inline; an overrun of its timeout
            # or of the deadline is noticed when it returns
            if end_ns is not None and mark >= end_ns:
                result, failed, error = None, "timeout", _NO_TIME_LEFT
                duration = 0
            else:
                try:
                    raw = fast(event)
                except HOOK_FAILURES as exc:
                    result, failed, error = None, "error", error_text(exc)
                    if not isinstance(exc, HookExecutionError):
                        logger.warning("hook %s raised %s", hook.id, error, exc_info=True)
                    now = perf_ns()
                    duration, mark = (now - mark) // 1000, now
                else:
                    now = perf_ns()
                    elapsed = now - mark
                    duration, mark = elapsed // 1000, now
                    limit = hook.timeout_ns
                    if (limit is not None and elapsed > limit) or (
                        end_ns is not None and now > end_ns
                    ):
                        result, failed, error = None, "timeout", _overran(hook, elapsed)
                    elif raw is None:
                        trace.append(
                            HookRun(hook_id=hook.id, outcome="continue", duration_us=duration)
                        )
                        continue
                    else:
                        failed = error = None
                        try:
                            result = raw if type(raw) is HookResult else coerce_result(raw, hook.id)
                        except HookExecutionError as exc:
                            result, failed, error = None, "error", exc.reason
        else:
            result, duration, failed, error = invoke(hook, event, end)
            mark = perf_ns()
        if failed is not None:
            if failed == "timeout":
                late.append(hook.id)
            if hook.on_error == "deny" and not hook.advisory:
                trace.append(
                    HookRun(
                        hook_id=hook.id,
                        outcome=failed,
                        duration_us=duration,
                        error=error,
                        notes=["on_error = deny"],
                    )
                )
                skipped(hooks, index, event, trace)
                return Decision(
                    outcome="deny",
                    reason=f"hook {hook.id!r} failed ({error}) and its on_error is deny",
                    updated=updated,
                    context=context,
                    signals=signals,
                    trace=trace,
                    degraded=bool(late),
                    bundle_version=version,
                    request_id=event.id,
                )
            trace.append(
                HookRun(hook_id=hook.id, outcome=failed, duration_us=duration, error=error)
            )
            continue
        assert result is not None
        if result is CONTINUE:
            trace.append(HookRun(hook_id=hook.id, outcome="continue", duration_us=duration))
            continue
        notes: list[str] = []
        perms = hook.perms[kind]
        if result.updated:
            payload, kept = apply_updates(event.payload, result.updated, perms, notes)
            if kept:
                event = msgspec.structs.replace(event, payload=payload)
                updated.update(kept)
        if result.context:
            if perms.context:
                if hook.prepend:
                    context[0:0] = result.context
                else:
                    context.extend(result.context)
            else:
                notes.append(f"dropped context: {kind} does not take added context")
        if result.signals:
            if perms.signals:
                signals.extend(result.signals)
            else:
                notes.append(f"dropped {len(result.signals)} signal(s): {kind} takes none")
        outcome = result.outcome
        if outcome in STOPPING and outcome not in perms.verdicts:
            if "deny" in perms.verdicts:
                notes.append(f"{outcome} is not allowed for {kind}; treated as deny")
                outcome = "deny"
            else:
                notes.append(f"dropped {outcome}: {kind} does not allow it")
                outcome = "continue"
        if outcome in STOPPING and hook.advisory:
            notes.append(f"{outcome} not enforced: the hook sets blocking = false")
            trace.append(
                HookRun(hook_id=hook.id, outcome=result.outcome, duration_us=duration, notes=notes)
            )
            continue
        trace.append(HookRun(hook_id=hook.id, outcome=outcome, duration_us=duration, notes=notes))
        if outcome in STOPPING:
            skipped(hooks, index, event, trace)
            return Decision(
                outcome=_VERDICT[outcome],
                reason=result.reason or f"{outcome} by hook {hook.id!r}",
                updated=updated,
                context=context,
                signals=signals,
                trace=trace,
                degraded=bool(late),
                bundle_version=version,
                request_id=event.id,
            )
    return Decision(
        outcome="allow",
        reason=_late_reason(late) if late else None,
        updated=updated,
        context=context,
        signals=signals,
        trace=trace,
        degraded=bool(late),
        bundle_version=version,
        request_id=event.id,
    )


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
            runs.append(ShadowRun(hook=hook.id, outcome="skipped", reason=_NO_TIME_LEFT))
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


def skipped(
    hooks: tuple[CompiledHook, ...], index: int, event: Event, trace: list[HookRun]
) -> None:
    for later in hooks[index + 1 :]:
        if later.match is None or later.match(event):
            trace.append(HookRun(hook_id=later.id, outcome="skipped"))


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
