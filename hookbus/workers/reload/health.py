"""Whether a worker's hook set is complete, judged from what its HookHost reports.

A hook the bundle (or folder) declares but that does not load on this worker (its module
missing here, an import error, ``requires`` unmet) is listed in
:meth:`~hookbus.workers.reload.hookset.HookHost.info`'s ``problems``; a bundle refused at start
leaves no set at all (``version`` None with a ``refused`` record). Either way the worker
must not answer as if its guards had run: the chain worker answers every request by its
kind's policy, flagged degraded, and its heartbeat says ``healthy: false`` with the reason.
A hook that could not be *built* here is left out alone (its problem says so): the rest of
the set answers, and only the kinds it guarded (``missing_guards``, :func:`closed_kinds`)
are answered closed. A refused *newer* bundle is not a gap: the host keeps the last
complete set, and the refusal note it adds to ``problems`` is recognised and left out. Nor
is a shadow hook that did not load (``mode = "shadow"``): it decides nothing, so the
answers stay the chain's.
"""

from __future__ import annotations

import re
from typing import Any

from hookbus.hooks.compiled import SHADOW_NOT_LOADED
from hookbus.hooks.loader import LEFT_OUT

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
        return None  # nothing pushed yet: the empty chain is the declared set
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


def closed_kinds(info: dict[str, Any]) -> frozenset[str]:
    """The kinds whose guard was left out of the set described by ``info``: answered
    closed (denied, flagged degraded) while the rest of the set answers."""
    return frozenset(str(kind) for kind in info.get("missing_guards") or ())
