"""One log line per hook run, at INFO, with structured fields.

A log shipper gets, for every hook run on the fleet, ``hook``, ``kind``, ``outcome``,
``duration_ms``, ``worker``, ``bundle_version`` and ``request_id`` (plus ``event_id``,
``error`` when the run failed, and ``shadow`` for a shadow hook's run) as top-level keys
under ``--log-format json``. The chain side logs from the decision's trace after the chain
ran; the fan-out side from the RQ job once its hook returned or failed.

The lines go to this module's logger (``hookbus.workers.fleet.hook_run_log``), so an operator can
keep them out of a busy worker's log with that logger's level; the default WARNING level
of the CLI shows none. Nothing is formatted when INFO is off: one ``isEnabledFor`` per
request.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hookbus.bus.wire import Decision, Event

log = logging.getLogger(__name__)


def _emit(fields: dict[str, Any]) -> None:
    log.info(
        "hook %s %s on %s in %.2f ms",
        fields["hook"],
        fields["outcome"],
        fields["kind"],
        fields["duration_ms"],
        extra={"fields": fields},
    )


def log_decision_runs(
    event: Event, decision: Decision, *, worker: str | None, bundle_version: str | None
) -> None:
    """One line per hook the chain ran for ``event`` (and per shadow hook run); hooks the
    chain skipped after a stop did not run and get none."""
    if not log.isEnabledFor(logging.INFO):
        return
    common = {
        "kind": event.kind,
        "worker": worker,
        "bundle_version": bundle_version,
        "request_id": decision.request_id or event.request_id or event.id,
        "event_id": event.id,
    }
    for run in decision.trace:
        if run.outcome == "skipped":
            continue
        fields: dict[str, Any] = {
            "hook": run.hook_id,
            "outcome": run.outcome,
            "duration_ms": round(run.duration_us / 1000, 3),
            **common,
        }
        if run.error:
            fields["error"] = run.error
        _emit(fields)
    for shadow in decision.shadow:
        if shadow.outcome == "skipped":
            continue
        fields = {
            "hook": shadow.hook,
            "outcome": shadow.outcome,
            "duration_ms": round(shadow.duration_us / 1000, 3),
            **common,
            "shadow": True,
        }
        if shadow.outcome in ("error", "timeout") and shadow.reason:
            fields["error"] = shadow.reason
        _emit(fields)


def log_job_run(
    hook: str,
    events: list[Event],
    *,
    outcome: str,
    duration_us: int,
    worker: str | None,
    bundle_version: str | None,
    error: str | None = None,
) -> None:
    """The line of one fan-out job's hook run (a batching hook's run names its first
    event and says how many it took)."""
    if not log.isEnabledFor(logging.INFO):
        return
    first = events[0] if events else None
    fields: dict[str, Any] = {
        "hook": hook,
        "outcome": outcome,
        "duration_ms": round(duration_us / 1000, 3),
        "kind": first.kind if first is not None else "",
        "worker": worker,
        "bundle_version": bundle_version,
        "request_id": (first.request_id or first.id) if first is not None else None,
        "event_id": first.id if first is not None else None,
    }
    if len(events) > 1:
        fields["events"] = len(events)
    if error:
        fields["error"] = error
    _emit(fields)
