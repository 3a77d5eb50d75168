"""Whether a worker's hook set is complete, judged from what its HookHost reports.

A hook the bundle (or folder) declares but that does not load on this worker (its module
missing here, an import error, ``requires`` unmet) is listed in
:meth:`~hookbus.workers.reload.hookset.HookHost.info`'s ``problems``; a bundle refused at start
leaves no set at all (``version`` None with a ``refused`` record). Either way the worker
must not answer as if its guards had run: the chain worker answers every request by its
kind's policy, flagged degraded, and its heartbeat says ``healthy: false`` with the reason.
A hook that could not be *built* here, in a set this worker runs because it had no
complete one to keep, is left out alone (its problem says so): the rest of the set answers,
the kinds it guarded (``missing_guards``, :func:`closed_kinds`) are answered closed and the
other kinds it decided (``missing_kinds``, :func:`policy_kinds`) by their failure policy,
flagged degraded. A refused *newer* bundle is not a gap: the host keeps the last
complete set, and the refusal note it adds to ``problems`` is recognised and left out. Nor
is a shadow hook that did not load (``mode = "shadow"``): it decides nothing, so the
answers stay the chain's.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from hookbus.bus.policy.timeout import Policy
from hookbus.hooks.compiled import SHADOW_NOT_LOADED
from hookbus.hooks.loader import LEFT_OUT

log = logging.getLogger(__name__)

#: How HookHost words a refusal it adds to ``problems`` (the current set stays).
_REFUSAL = re.compile(r"^(bundle|dir) \S+ (refused|not loaded|not written)")
#: Problems quoted in a reason at most (the heartbeat carries them all).
_QUOTED = 3


def incomplete_reason(info: dict[str, Any]) -> str | None:
    """Why the hook set described by ``info`` lacks declared hooks; None when it does not."""
    refused = info.get("refused")
    refusal = refused.get("reason") if isinstance(refused, dict) else None
    if info.get("version") is None:
        if refusal:
            return f"no hook set loaded ({refusal})"
        # Redis names no bundle (none pushed yet, or Redis lost its state) and no folder
        # loaded: an empty chain would answer a plain allow that no guard decided
        return "no hook set loaded (Redis names no bundle and no hooks folder was loaded)"
    problems = [str(p) for p in info.get("problems") or []]
    missing = [
        p
        for p in problems
        if p != refusal
        and not _REFUSAL.match(p)
        and SHADOW_NOT_LOADED not in p
        and not p.endswith(f"({LEFT_OUT})")
    ]
    if not missing:
        return None
    more = f" (and {len(missing) - _QUOTED} more)" if len(missing) > _QUOTED else ""
    quoted = "; ".join(missing[:_QUOTED])
    return f"hook set {info.get('version')} lacks declared hook(s): {quoted}{more}"


def policy_kinds(info: dict[str, Any]) -> frozenset[str]:
    """The kinds an enforcing hook (not a guard) decided that was left out of the set
    described by ``info``: answered by the kind's failure policy, flagged degraded."""
    return frozenset(str(kind) for kind in info.get("missing_kinds") or ())


def closed_kinds(info: dict[str, Any]) -> frozenset[str]:
    """The kinds whose guard was left out of the set described by ``info``: answered
    closed (denied, flagged degraded) while the rest of the set answers."""
    return frozenset(str(kind) for kind in info.get("missing_guards") or ())


@dataclass(frozen=True)
class HookSetVerdict:
    """What a chain worker's hook set lacks, and so how it answers: every request by its
    kind's policy (``problem``), the kinds of a left-out guard denied (``closed``), the other
    kinds a left-out hook decided by their policy (``by_policy``); all flagged degraded."""

    problem: str | None = None
    closed: frozenset[str] = frozenset()
    by_policy: frozenset[str] = frozenset()

    @classmethod
    def of(cls, info: dict[str, Any]) -> HookSetVerdict:
        """The verdict on the set a :class:`HookHost` describes in ``info``."""
        return cls(incomplete_reason(info), closed_kinds(info), policy_kinds(info))

    def gap(self, kind: str) -> tuple[Policy | None, str] | None:
        """How a request of ``kind`` is answered instead of by the chain: ``(outcome,
        detail)``, the outcome None for the kind's failure policy; None: run the chain."""
        if self.problem is not None:
            return None, self.problem
        if kind in self.closed:
            return "deny", f"a guard of {kind} could not be built on this worker"
        if kind in self.by_policy:
            return None, f"a hook deciding {kind} could not be loaded on this worker"
        return None

    def unhealthy(self) -> str | None:
        """The heartbeat's ``unhealthy`` line; None while the set is complete."""
        if self.problem is not None:
            return self.problem
        if self.closed:
            return f"a guard was left out: {', '.join(sorted(self.closed))} requests are denied"
        if self.by_policy:
            kinds = ", ".join(sorted(self.by_policy))
            return f"a hook was left out: {kinds} requests are answered by the failure policy"
        return None

    def log_change(self, before: HookSetVerdict) -> None:
        """Log what changed since ``before``: an operator reads why answers are degraded."""
        if self.closed and self.closed != before.closed:
            log.error("guards left out: denying %s, degraded", ", ".join(sorted(self.closed)))
        if self.by_policy and self.by_policy != before.by_policy:
            kinds = ", ".join(sorted(self.by_policy))
            log.error("hooks left out: answering %s by the failure policy, degraded", kinds)
        if self.problem != before.problem:
            if self.problem is None:
                log.info("hook set complete again: answering from the chain")
            else:
                log.error("%s: answering every request by policy, degraded", self.problem)
