"""What one non-blocking hook's RQ job looks like: its id, timeout and retries.

Job ids are derived from the event (or the batch's first event) and the hook, so a
redelivered entry maps to the job an earlier delivery already enqueued; the dispatcher's
markers (see :mod:`hookbus.workers.fanout.role`) rely on that.
"""

from __future__ import annotations

import hashlib
import math
from typing import TYPE_CHECKING, Any

from hookbus import defaults
from hookbus.bus import lua
from hookbus.bus.kinds import KindSpec

if TYPE_CHECKING:
    from hookbus.hooks.compiled import HookDescriptor


#: Job function RQ runs for one event and one hook.
HOOK_JOB_FUNC = "hookbus.workers.fanout.jobs.run_hook_job"
#: Job function RQ runs for a batch of events and one batching hook.
BATCH_JOB_FUNC = "hookbus.workers.fanout.jobs.run_batch_job"
#: Added to a hook's own timeout to make RQ's job timeout: the hook times itself out first
#: and reports a clean HookTimeout; RQ's timeout is the backstop. In seconds.
JOB_TIMEOUT_GRACE_S = 1
#: How long the marker "this event's (or batch's) jobs are enqueued" lives, in seconds: an
#: entry redelivered within this time (a dispatcher died between enqueue and ack) gets no
#: second job. Markers are written only for events with unbatched jobs and for batches.
DISPATCH_MARKER_TTL_S = 3_600
#: Tries of a watched enqueue transaction before the work is left for a later pass.
ENQUEUE_ATTEMPTS = 5
#: ``meta`` key of an answered request forwarded to the event log for its observers (the
#: decision: outcome, reason, deciding hook, degraded): see :mod:`.observer`.
OBSERVED_META = "decision"


def script_source(name: str) -> str:
    """One of the dispatcher's Lua scripts, shipped as package data next to this module."""
    return lua.source("hookbus.workers.fanout", name)


def job_id_for(event_id: str, hook_id: str) -> str:
    """The RQ job id of ``hook_id`` run on ``event_id``: the same on every redelivery.

    Hashed because RQ job ids allow only letters, digits, ``_`` and ``-`` while event and
    hook ids may hold anything.
    """
    digest = hashlib.blake2b(f"{event_id}\x00{hook_id}".encode(), digest_size=16).hexdigest()
    return f"hb-{digest}"


def batch_job_id_for(first_event_id: str, hook_id: str) -> str:
    """The RQ job id of a batch of ``hook_id`` starting with ``first_event_id``."""
    digest = hashlib.blake2b(
        f"{first_event_id}\x00{hook_id}\x00batch".encode(), digest_size=16
    ).hexdigest()
    return f"hbb-{digest}"


def fans_out(hook: HookDescriptor, spec: KindSpec | None) -> bool:
    """Whether ``hook`` runs as an RQ job for a published event of kind ``spec``.

    A hook declared ``blocking = true`` runs only in the chain; one declared ``false`` always
    fans out; one that says nothing follows its kind's default.
    """
    blocking = getattr(hook, "blocking", None)
    if blocking is None:
        return not (spec.blocking if spec is not None else False)
    return not blocking


def observes_requests(hook: HookDescriptor) -> bool:
    """Whether ``hook`` runs as an RQ job for an answered request (an event the observer
    forwarded): a ``blocking = false`` hook, unless it ran inside the chain (``inline``).
    The chain's own hooks already ran on it."""
    return getattr(hook, "blocking", None) is False and not getattr(hook, "inline", False)


def job_timeout_s(hook: HookDescriptor | None) -> int:
    """RQ's job timeout for a hook (whole seconds, as RQ requires)."""
    timeout = getattr(hook, "timeout_s", None) or defaults.DEFAULT_HOOK_TIMEOUT_S
    return max(1, math.ceil(timeout)) + JOB_TIMEOUT_GRACE_S


def rq_retry(hook: HookDescriptor) -> Any:
    """RQ's ``Retry`` for a hook's ``retries`` (count, intervals_s), or None for no retry."""
    from rq import Retry

    spec = getattr(hook, "retries", None)
    count = retry_count(hook)
    if count <= 0:
        return None
    intervals = [int(i) for i in (getattr(spec, "intervals_s", None) or [])]
    return Retry(max=count, interval=intervals or 0)


def retry_intervals(hook: HookDescriptor) -> list[int]:
    """The seconds a hook declared between its retries (empty: at once)."""
    spec = getattr(hook, "retries", None)
    return [int(i) for i in (getattr(spec, "intervals_s", None) or [])]


def retry_count(hook: HookDescriptor) -> int:
    """How many retries a hook declared (0 when none)."""
    spec = getattr(hook, "retries", None)
    return int(getattr(spec, "count", 0) or 0) if spec is not None else 0


def batch_spec(hook: HookDescriptor) -> tuple[int, int] | None:
    """A batching hook's (max_events, max_wait_ms); None for a hook that does not batch."""
    batch = getattr(hook, "batch", None)
    if batch is None:
        return None
    return max(1, int(batch.max_events)), max(0, int(batch.max_wait_ms))
