"""The chain: running compiled hooks against one event. The hot path.

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
from hookbus.hooks.permissions import apply_updates
from hookbus.hooks.results import CONTINUE, coerce_result

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


def hook_failed(hook: CompiledHook, exc: BaseException) -> str:
    """The error text of a hook that raised; an unexpected exception (anything but a
    :class:`HookExecutionError`, which already says what went wrong) is logged with its
    traceback, since nobody else will see it."""
    text = error_text(exc)
    if not isinstance(exc, HookExecutionError):
        logger.warning("hook %s raised %s", hook.id, text, exc_info=exc)
    return text


def invoke(
    hook: CompiledHook, event: Event, end: float | None
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
        return None, (time.perf_counter_ns() - started) // 1000, "error", hook_failed(hook, exc)
    return result, (time.perf_counter_ns() - started) // 1000, None, None


def _late_reason(late: list[str]) -> str:
    named = ", ".join(repr(h) for h in late)
    return f"hook(s) {named} timed out or were at their concurrency cap; their on_error answered"


#: Stands for "no deadline" where the chain compares clock readings: later than any reading.
_NEVER_NS = 1 << 126


class _Raised:
    """What an inline hook raised, kept apart from what it returned."""

    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def _inline_outcome(
    hook: CompiledHook, raw: Any, elapsed_ns: int, now_ns: int, end_ns: int
) -> tuple[HookResult | None, str | None, str | None]:
    """(result, failure outcome, error text) of an inline call that did not simply let the
    event through in time: it raised (``error``), returned past its timeout or the request's
    deadline (``timeout``, whatever it returned), or returned something to coerce into a
    :class:`HookResult` (``error`` when that fails)."""
    if type(raw) is _Raised:
        return None, "error", hook_failed(hook, raw.exc)
    if elapsed_ns > hook.limit_ns or now_ns > end_ns:
        return None, "timeout", _overran(hook, elapsed_ns)
    if raw is None:
        return CONTINUE, None, None
    try:
        return (raw if type(raw) is HookResult else coerce_result(raw, hook.id)), None, None
    except HookExecutionError as exc:
        return None, "error", exc.reason


def _record_failure(
    hook: CompiledHook,
    failed: str,
    duration: int,
    error: str | None,
    trace: list[HookRun],
    late: list[str],
) -> bool:
    """Record a hook that failed (``error``) or answered late (``timeout``); True when its
    ``on_error = deny`` (and it is not advisory) makes the failure deny the request."""
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
        return True
    trace.append(HookRun(hook_id=hook.id, outcome=failed, duration_us=duration, error=error))
    return False


def _merge(
    hook: CompiledHook, result: HookResult, duration: int, event: Event, decision: Decision
) -> tuple[str, Event]:
    """Fold one hook's result into the decision being gathered, within what the event kind
    permits (anything else is dropped with a note on the trace). Returns the outcome that
    stands (``continue`` unless the hook stops the chain) and the event as changed."""
    kind = event.kind
    perms = hook.perms[kind]
    notes: list[str] = []
    if result.updated:
        payload, kept = apply_updates(event.payload, result.updated, perms, notes)
        if kept:
            event = msgspec.structs.replace(event, payload=payload)
            decision.updated.update(kept)
    if result.context:
        if not perms.context:
            notes.append(f"dropped context: {kind} does not take added context")
        elif hook.prepend:
            decision.context[0:0] = result.context
        else:
            decision.context.extend(result.context)
    if result.signals:
        if perms.signals:
            decision.signals.extend(result.signals)
        else:
            notes.append(f"dropped {len(result.signals)} signal(s): {kind} takes none")
    outcome = _permitted(result.outcome, kind, perms.verdicts, notes)
    if outcome in STOPPING and hook.advisory:
        notes.append(f"{outcome} not enforced: the hook sets blocking = false")
        decision.trace.append(
            HookRun(hook_id=hook.id, outcome=result.outcome, duration_us=duration, notes=notes)
        )
        return "continue", event
    decision.trace.append(
        HookRun(hook_id=hook.id, outcome=outcome, duration_us=duration, notes=notes)
    )
    return outcome, event


def _stopped(decision: Decision, outcome: Verdict, reason: str, late: list[str]) -> Decision:
    """The decision of a chain that a hook (or its failure) stopped."""
    decision.outcome = outcome
    decision.reason = reason
    decision.degraded = bool(late)
    return decision


def _permitted(outcome: str, kind: str, verdicts: frozenset[str], notes: list[str]) -> str:
    """A stopping outcome the event kind does not allow becomes ``deny`` when the kind allows
    that, else ``continue``; a note says which."""
    if outcome not in STOPPING or outcome in verdicts:
        return outcome
    if "deny" in verdicts:
        notes.append(f"{outcome} is not allowed for {kind}; treated as deny")
        return "deny"
    notes.append(f"dropped {outcome}: {kind} does not allow it")
    return "continue"


def run_chain(
    event: Event,
    hooks: tuple[CompiledHook, ...],
    version: str | None,
    time_left_s: float | None,
) -> Decision:
    """Run the enforcing chain of a blocking request and return its decision.

    Hooks run in order (``hooks`` is already sorted), each on the event as the hooks before
    it changed it. The first hook to deny, ask or halt (as its event kind permits) stops the
    chain; the hooks after it are recorded as ``skipped``. A hook that fails or answers past
    its timeout or ``time_left_s`` counts by its ``on_error``: ``deny`` denies the request,
    ``allow`` goes on, and a late answer marks the decision degraded.

    A sync python hook that may run inline is called directly, with one clock read per
    hook (each duration runs from the previous hook's end) and an overrun noticed when it
    returns; every other hook goes through :func:`invoke`, which bounds its call by its
    timeout and the time left. A hook that returns ``None`` in time is the common case and
    takes the shortest path through the loop.
    """
    end = None if time_left_s is None else time.perf_counter() + time_left_s
    end_ns = None if time_left_s is None else perf_ns() + int(time_left_s * 1e9)
    decision = Decision(bundle_version=version, request_id=event.id)  # gathered as hooks run
    trace = decision.trace
    late: list[str] = []  # hooks past their timeout or cap: their on_error answered
    mark = perf_ns()
    for index, hook in enumerate(hooks):
        if hook.match is not None and not hook.match(event):
            continue  # not this hook's event: not on the trace
        fast = hook.direct if (hook.inline_free if end is None else hook.inline_deadline) else None
        if fast is None:
            # bounded by its timeout and the time left, failures caught by invoke
            result, duration, failed, error = invoke(hook, event, end)
            mark = perf_ns()
        elif end_ns is not None and mark >= end_ns:
            # the deadline passed before this hook's turn: it does not start
            result, duration, failed, error = None, 0, "timeout", _NO_TIME_LEFT
        else:
            try:
                raw = fast(event)
            except HOOK_FAILURES as exc:
                raw = _Raised(exc)
            now = perf_ns()
            elapsed = now - mark
            duration, mark = elapsed // 1000, now
            if raw is None and elapsed <= hook.limit_ns and (end_ns is None or now <= end_ns):
                # the common case: the hook let the event through in time
                trace.append(HookRun(hook_id=hook.id, outcome="continue", duration_us=duration))
                continue
            result, failed, error = _inline_outcome(hook, raw, elapsed, now, end_ns or _NEVER_NS)
        if failed is not None:
            if _record_failure(hook, failed, duration, error, trace, late):
                skipped(hooks, index, event, trace)
                reason = f"hook {hook.id!r} failed ({error}) and its on_error is deny"
                return _stopped(decision, "deny", reason, late)
            continue
        assert result is not None
        if result is CONTINUE:
            trace.append(HookRun(hook_id=hook.id, outcome="continue", duration_us=duration))
            continue
        outcome, event = _merge(hook, result, duration, event, decision)
        if outcome in STOPPING:
            skipped(hooks, index, event, trace)
            reason = result.reason or f"{outcome} by hook {hook.id!r}"
            return _stopped(decision, _VERDICT[outcome], reason, late)
    if late:
        decision.reason = _late_reason(late)
        decision.degraded = True
    return decision


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
    """Record the matching hooks after ``index`` as ``skipped``: the chain stopped first."""
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
