"""Swapping a hooks folder into a worker's registry, and judging what it left out.

A worker loads a folder (a materialised bundle, or ``--hooks-dir``) in one step: parse the
manifests, build every enabled hook, swap them in with one ``replace_dynamic`` call. A hook
that cannot be loaded or built here (its module does not import, a program without its run
bit, ``requires`` unmet) is left out; when it could decide an answer (an enforcing hook),
the new set would answer some requests differently from what the bundle declares. So while
the worker runs a complete set, such a swap is refused and that set stays; with no complete
set to keep, the new one runs and the kinds it lacks are answered degraded (see
:mod:`hookbus.workers.reload.health`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from hookbus.hooks.loader import LEFT_OUT, decides, kinds_left_out, load_hooks

if TYPE_CHECKING:
    from hookbus.bus.kinds import Catalogue
    from hookbus.errors import HookRegistrationError
    from hookbus.hooks.registry import HookRegistry


@dataclass
class Swap:
    """What one swap did: ``refusal`` set when it was refused (nothing changed); else the
    hooks that run (``loaded``), the problems to report, and the kinds left without a
    guard (``guarded``) or without another enforcing hook (``decided``)."""

    refusal: str | None = None
    loaded: int = 0
    problems: list[str] = field(default_factory=list)
    guarded: list[str] = field(default_factory=list)
    decided: list[str] = field(default_factory=list)


def _shown(problem: object, prefix: str) -> str:
    """A load problem as workers report it (bundle paths relative to the bundle)."""
    return str(problem).replace(prefix, "") if prefix else str(problem)


def swap_folder(
    registry: HookRegistry,
    folder: Path,
    version: str,
    *,
    catalogue: Catalogue,
    relative: bool,
    keep_complete: bool,
) -> Swap:
    """Load ``folder`` into ``registry`` as ``version``.

    ``relative``: show problem paths relative to ``folder`` (a bundle in the cache).
    ``keep_complete``: the registry runs a complete set now; refuse a swap that would leave
    out a hook able to decide. Raises :class:`~hookbus.errors.HookBusError` when the folder
    cannot be read at all (nothing changed).
    """
    report = load_hooks(folder, catalogue=catalogue)
    prefix = f"{folder}/" if relative else ""
    skipped = {m.name for m in report.skipped if m.enabled}
    problems = [
        _shown(p, prefix) + (f" ({LEFT_OUT})" if p.hook in skipped else "") for p in report.problems
    ]
    manifests = list(report.enabled)
    declared = [*manifests, *report.skipped]
    deciders = {m.name for m in declared if m.enabled and decides(m)}

    def accept(errors: list[HookRegistrationError]) -> bool:
        lost = (skipped | {e.hook_id for e in errors}) & deciders
        return not (lost and keep_complete)

    # non-strict: a hook that does not register here is left out and reported
    errors = registry.replace_dynamic(manifests, version=version, accept=accept)
    left_out = sorted(skipped | {e.hook_id for e in errors})
    if not accept(errors):
        reasons = [p for p in problems if p.endswith(f"({LEFT_OUT})")] + [str(e) for e in errors]
        return Swap(
            refusal=f"{', '.join(left_out)} cannot be loaded on this worker ({'; '.join(reasons)})"
        )
    problems.extend(f"{e} ({LEFT_OUT})" for e in errors)
    guarded, decided = kinds_left_out(declared, left_out)
    return Swap(
        loaded=len(manifests) - len(errors),
        problems=problems,
        guarded=guarded,
        decided=decided,
    )
