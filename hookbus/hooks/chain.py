"""The chain: running compiled hooks against one event. The hot path.

:class:`~hookbus.hooks.registry.HookRegistry` compiles hooks into
:class:`~hookbus.hooks.compiled.CompiledHook` objects (plain attributes, nothing validated
per call) and keeps per-kind tuples of them in execution order; :func:`run_chain`
(blocking kinds) walks one such tuple; the other runs (non-blocking kinds, shadow hooks) are
:mod:`hookbus.hooks.runs`. A sync
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

from hookbus.bus.wire import Decision, Event, HookResult, HookRun, Verdict
from hookbus.errors import HookExecutionError, HookTimeout
from hookbus.hooks.compiled import CompiledHook
from hookbus.hooks.permissions import apply_updates
from hookbus.hooks.results import CONTINUE, coerce_result

logger = logging.getLogger(__name__)

STOPPING = frozenset({"deny", "ask", "halt"})
_VERDICT: dict[str, Verdict] = {"continue": "allow", "deny": "deny", "ask": "ask", "halt": "halt"}


#: Why a hook whose turn came after the deadline did not run.
NO_TIME_LEFT = "no time left before the request's deadline"

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
            result, duration, failed, error = None, 0, "timeout", NO_TIME_LEFT
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


def skipped(
    hooks: tuple[CompiledHook, ...], index: int, event: Event, trace: list[HookRun]
) -> None:
    """Record the matching hooks after ``index`` as ``skipped``: the chain stopped first."""
    for later in hooks[index + 1 :]:
        if later.match is None or later.match(event):
            trace.append(HookRun(hook_id=later.id, outcome="skipped"))
