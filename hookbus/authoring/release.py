"""Release a hooks folder to the fleet: validate, audit, then store and announce it.

This is the gate in front of :mod:`hookbus.bus.bundle_store`: the bus stores bytes it is
handed and knows nothing of manifests or the audit, so the decision whether a folder may
become the fleet's hook set is made here, where the loader and the audit may be imported.
``hookbus reload``, the MCP tool ``hooks_reload`` and ``hookbus dev`` all release through
:func:`release_folder`.
"""

from __future__ import annotations

import getpass
import logging
import socket
from pathlib import Path
from typing import TYPE_CHECKING

from hookbus.audit.folder import Finding, audit_folder
from hookbus.bus.bundle_pack import AuditSummary, collect_files
from hookbus.bus.bundle_store import PushResult, store_and_announce
from hookbus.errors import BundleError, SecurityViolation
from hookbus.hooks.loader import load_hooks

if TYPE_CHECKING:
    import redis

    from hookbus.bus.settings import Settings

log = logging.getLogger(__name__)


def _validate(hooks_dir: Path, settings: Settings) -> tuple[list[str], list[str]]:
    """(names of hooks that load, problems) as the loader sees the folder."""
    report = load_hooks(hooks_dir, catalogue=settings.catalogue())
    names = [m.name for m in report.enabled]
    return names, [str(p) for p in report.problems]


def _finding_line(finding: Finding) -> str:
    where = finding.file or ""
    if finding.line:
        where = f"{where}:{finding.line}"
    return f"{finding.severity} {finding.rule} {where}: {finding.message}".replace("  ", " ")


def _audit(hooks_dir: Path, settings: Settings) -> AuditSummary:
    """Run the security audit; critical findings refuse the bundle."""
    report = audit_folder(hooks_dir, settings=settings)
    return AuditSummary(
        ran=True,
        skipped=bool(settings.security.skip_security_audit),
        critical=len(report.critical),
        findings=[_finding_line(f) for f in report.findings],
    )


def default_who() -> str:
    """``user@host`` of this process, recorded as the pusher when none is given."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def release_folder(
    client: redis.Redis,
    settings: Settings,
    hooks_dir: Path,
    *,
    who: str | None = None,
    strict: bool = False,
) -> PushResult:
    """Validate, audit, store and announce the hooks folder as the current bundle.

    Raises :class:`SecurityViolation` when the audit has critical findings and
    :class:`BundleError` when the folder cannot be packed (symlinks, size) or, with
    ``strict``, when any hook has a validation problem; in both cases nothing is stored
    and the fleet keeps its current set. Without ``strict`` an invalid manifest is a
    warning (returned in ``problems``): the others load, as on every worker.
    """
    hooks_dir = Path(hooks_dir)
    files = collect_files(hooks_dir, max_bytes=settings.reload.max_bundle_bytes)
    names, problems = _validate(hooks_dir, settings)
    if strict and problems:
        raise BundleError(
            f"{len(problems)} problem(s) in {hooks_dir}, nothing published: " + "; ".join(problems)
        )
    audit = _audit(hooks_dir, settings)
    if audit.critical:
        raise SecurityViolation(
            f"the audit found {audit.critical} critical problem(s) in {hooks_dir}; "
            "nothing was published and the fleet keeps its current hooks: "
            + "; ".join(f for f in audit.findings if f.startswith("critical")),
            audit.findings,
        )
    return store_and_announce(
        client,
        settings,
        files,
        who=who or default_who(),
        source=hooks_dir.resolve(),
        hooks=names,
        problems=problems,
        audit=audit,
    )
