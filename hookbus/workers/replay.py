"""``hookbus replay``: what a candidate hooks folder would have decided on recorded traffic.

The decision log (``hookbus:{ns}:decisions``; an entry may hold a worker's batch of
decisions, :mod:`hookbus.bus.decision_batch`) keeps, for every answered request, its kind,
outcome, the whole :class:`Decision` and the request's stream entry id (``entry``). Replay
walks the log over a time window, fetches each request back from the request stream, runs
it through a registry built from the candidate folder, in this process, and reports every
request whose outcome would change. That is the safety net before ``hookbus reload``: the
operator sees which real calls a new guard would have denied (or let through) first.

With ``partitions`` > 1 every partition has its own decision log and request stream
(``{ns:p}``, on a Redis Cluster on the master serving it): replay walks each partition's
log in turn, fetches each request from its own partition's stream, and reports over all of
them (changes in time order).

What cannot be replayed is counted, never guessed: a request trimmed from the request
stream (``missing``) and a decision a policy made rather than the hooks (``degraded``:
comparing hooks with a timeout policy says nothing about the hooks). The fan-out jobs'
``hook_run`` records share the log but answer no request: they are not counted at all.

A change names the hook that decided the candidate's outcome, with that hook's own reason
(none when no hook stopped the chain: an allow), and the recorded decision's decider and
reason beside it, so ``deny -> allow`` reads as "the rm guard no longer stops it".
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, cast

import redis

from hookbus.bus import reqrep
from hookbus.bus.connection import client_url, translated
from hookbus.bus.decision_batch import expand
from hookbus.bus.keys import Keys
from hookbus.bus.tail import HOOK_RUN_TYPE, Target
from hookbus.bus.wire import Decision, decode
from hookbus.errors import ConfigError, WireError
from hookbus.hooks.registry import HookRegistry

log = logging.getLogger(__name__)

#: Decision-log entries read per XRANGE page.
PAGE_SIZE = 500
#: Time a replayed chain may take, in seconds (replay has no producer waiting).
REPLAY_BUDGET_S = 10.0

_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_time_ms(text: str, *, now_ms: int | None = None) -> int:
    """A point in time as Unix ms: ``15m`` / ``2h`` / ``1d`` ago, an ISO 8601 time, or ms.

    Raises :class:`ConfigError` naming the accepted forms.
    """
    value = text.strip()
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    match = _RELATIVE.match(value)
    if match:
        return now - int(float(match.group(1)) * _UNIT_MS[match.group(2)])
    if value.isdigit():
        return int(value)
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ConfigError(
            f"cannot read the time {text!r}: use a duration ago (30s, 15m, 2h, 1d), "
            "an ISO 8601 time (2026-11-24T10:00:00+00:00) or Unix milliseconds"
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # a time without zone is local, as a person means it
    return int(moment.timestamp() * 1000)


@dataclass(frozen=True)
class Change:
    """A recorded request whose outcome the candidate hooks would change."""

    request_id: str
    kind: str
    before: str
    after: str
    hook: str | None
    reason: str | None
    at_ms: int
    #: The recorded decision's deciding hook and reason (None for an allow nobody stopped).
    was_hook: str | None = None
    was_reason: str | None = None


@dataclass
class ReplayReport:
    replayed: int = 0
    changed: list[Change] = field(default_factory=list)
    #: Requests whose outcome differs only because a hook hit its deadline, in the replay
    #: or in the recorded run: a loaded machine's verdict, not a change of the hooks.
    timed_out: list[Change] = field(default_factory=list)
    missing: int = 0
    degraded: int = 0
    undecodable: int = 0
    #: What the candidate's shadow hooks said on the replayed requests: hook -> outcome ->
    #: how many times (a trial guard's would-be denials, before it is made enforcing).
    shadow: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "replayed": self.replayed,
            "changed": [asdict(c) for c in self.changed],
            "timed_out": [asdict(c) for c in self.timed_out],
            "missing": self.missing,
            "degraded": self.degraded,
            "undecodable": self.undecodable,
            "shadow": self.shadow,
        }


def _deciding_hook(decision: Decision) -> str | None:
    """The hook that stopped the chain: the last one that ran before those it skipped (a
    hook that denied, asked or halted, or failed with ``on_error = "deny"``). None for an
    allow: every hook let the request through, so none decided it."""
    if decision.outcome == "allow":
        return None
    for run in reversed(decision.trace):
        if run.outcome != "skipped":
            return run.hook_id
    return None


def _own_reason(decision: Decision) -> str | None:
    """The reason the deciding hook gave; None for an allow, whose reason (hooks past
    their timeout, say) is no hook's verdict."""
    return decision.reason if decision.outcome != "allow" else None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _log_pages(
    client: redis.Redis, keys: Keys, since_ms: int, until_ms: int | None
) -> Iterator[list[tuple[bytes, dict[bytes, bytes]]]]:
    start: str = f"{since_ms}-0"
    end = f"{until_ms}-18446744073709551615" if until_ms is not None else "+"
    while True:
        page = cast("list[Any]", client.xrange(keys.decisions, start, end, count=PAGE_SIZE))
        if not page:
            return
        # an entry written in bulk holds several decisions (hookbus.bus.decision_batch);
        # a fan-out job's hook_run record answers no request
        yield [
            (log_id, record)
            for log_id, fields in page
            for record in expand(fields)
            if _text(record.get(b"type", b"")) != HOOK_RUN_TYPE
        ]
        if len(page) < PAGE_SIZE:
            return
        start = "(" + _text(page[-1][0])


def count_entries(parts: Sequence[Target], since_ms: int, until_ms: int | None) -> int:
    """How many decisions the window holds over every partition's log (for a progress
    bar's total); ``parts`` as :func:`hookbus.bus.tail.targets` gives them."""
    total = 0
    for part in parts:
        with translated(client_url(part.client)):
            pages = _log_pages(part.client, part.keys, since_ms, until_ms)
            total += sum(len(page) for page in pages)
    return total


def replay(
    parts: Sequence[Target],
    registry: HookRegistry,
    *,
    since_ms: int,
    until_ms: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> ReplayReport:
    """Replay the window's requests of every partition in ``parts`` (each a partition's
    client and keys, :func:`hookbus.bus.tail.targets`) through ``registry``;
    see the module docstring."""
    report = ReplayReport()
    for part in parts:
        with translated(client_url(part.client)):
            _replay_partition(report, part, registry, since_ms, until_ms, progress)
    report.changed.sort(key=lambda change: change.at_ms)  # partitions were walked in turn
    return report


def _replay_partition(
    report: ReplayReport,
    part: Target,
    registry: HookRegistry,
    since_ms: int,
    until_ms: int | None,
    progress: Callable[[int], None] | None,
) -> None:
    """One partition's log over the window, each request fetched from its own stream (a
    decision's ``entry`` is an id in the request stream of the partition that logged it)."""
    client, keys = part.client, part.keys
    for page in _log_pages(client, keys, since_ms, until_ms):
        pipe = client.pipeline(transaction=False)
        for _, fields in page:
            entry = fields.get(b"entry")
            if entry:
                pipe.xrange(keys.requests, entry, entry, count=1)
            else:
                pipe.echo(b"")  # keeps positions aligned with the page
        requests = pipe.execute()
        for (log_id, fields), found in zip(page, requests, strict=True):
            _replay_one(report, registry, log_id, fields, found)
        if progress is not None:
            progress(len(page))


def _replay_one(
    report: ReplayReport,
    registry: HookRegistry,
    log_id: bytes,
    fields: dict[bytes, bytes],
    found: Any,
) -> None:
    if fields.get(b"degraded") == b"1":
        report.degraded += 1
        return
    if not isinstance(found, list) or not found:
        report.missing += 1
        return
    try:
        event = reqrep.decode_request(found[0][1])
        before = decode(fields[b"d"], Decision)
    except (WireError, KeyError) as exc:
        log.warning("decision log entry %s cannot be replayed: %s", _text(log_id), exc)
        report.undecodable += 1
        return
    after = registry.run(event, time_left_s=REPLAY_BUDGET_S, blocking=True)
    report.replayed += 1
    for run in after.shadow:
        said = report.shadow.setdefault(run.hook, {})
        said[run.outcome] = said.get(run.outcome, 0) + 1
    if after.outcome != before.outcome:
        timed_out = any(run.outcome == "timeout" for run in (*before.trace, *after.trace))
        (report.timed_out if timed_out else report.changed).append(
            Change(
                request_id=before.request_id or event.id,
                kind=event.kind,
                before=before.outcome,
                after=after.outcome,
                hook=_deciding_hook(after),
                reason=_own_reason(after),
                at_ms=int(_text(log_id).split("-")[0]),
                was_hook=_deciding_hook(before),
                was_reason=_own_reason(before),
            )
        )
