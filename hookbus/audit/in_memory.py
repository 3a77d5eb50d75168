"""The audit of one hook whose files are still in memory: self-authoring audits what it is
about to write before anything touches disk, with the same rules as a folder on disk.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from hookbus.audit.autonomy import AutonomyPolicy
from hookbus.audit.collector import Collector
from hookbus.audit.engine import (
    MANIFEST_NAMES,
    SINGLE_FILE_SUFFIXES,
    audit_source,
    decode_text,
    finish_report,
    hooks_dir_refs,
    resolve_policy,
)
from hookbus.audit.report import AuditReport, HookSource
from hookbus.audit.shell.commands import escapes_folder
from hookbus.audit.walk import flag_too_large

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings

logger = logging.getLogger(__name__)


def audit_files(
    name: str,
    files: Mapping[str, str | bytes],
    *,
    settings: Settings | None = None,
    policy: AutonomyPolicy | None = None,
    hooks_dir: Path | None = None,
    agent: bool | None = None,
) -> AuditReport:
    """Audit one hook whose files are still in memory (self-authoring audits before writing).

    ``files`` maps paths relative to the hook folder to their content; the manifest is the
    ``HOOK.toml`` / ``HOOK.md`` among them (or a single ``*.yaml``). ``hooks_dir`` is where
    the hook would land, so that writes into it are recognised. ``agent`` says whether an agent
    wrote it (``None``: as the manifest's ``author`` says)."""
    pol = resolve_policy(settings, policy)
    collector = Collector(name)
    prefix = f"{name}/"
    blobs: dict[str, bytes] = {}
    for rel, content in files.items():
        data = (
            content.encode("utf-8", errors="replace")
            if isinstance(content, str)
            else bytes(content)
        )
        if escapes_folder(rel) or rel.startswith(".") or "/." in rel:
            collector.add(
                "path-escape",
                "critical",
                f"{prefix}{rel}",
                None,
                f"the file name {rel!r} leaves the hook folder or is hidden: use a plain name "
                "inside it",
            )
            continue
        if len(data) > pol.max_file_bytes:
            flag_too_large(collector, f"{prefix}{rel}", len(data), pol.max_file_bytes)
            continue
        blobs[rel] = data
    manifest_rel = next((m for m in MANIFEST_NAMES if m in blobs), None)
    if manifest_rel is None:
        manifest_rel = next((r for r in blobs if r.endswith(SINGLE_FILE_SUFFIXES)), None)
    src = HookSource(
        name=name,
        prefix=prefix,
        manifest_file=f"{prefix}{manifest_rel}" if manifest_rel else None,
        manifest_text=decode_text(blobs[manifest_rel]) if manifest_rel else None,
        files={r: d for r, d in blobs.items() if r != manifest_rel},
        local_names=frozenset(blobs),
        agent=agent,
    )
    skip = False
    try:
        skip, _ = audit_source(src, pol, hooks_dir_refs(hooks_dir), collector)
    except Exception as exc:
        logger.exception("audit failed on in-memory hook %s", name)
        collector.add(
            "audit-internal",
            "high",
            prefix,
            None,
            f"the audit failed ({type(exc).__name__}); review by hand",
        )
    return finish_report(name, collector, pol, skip, src.manifest_file or prefix, src.manifest_text)
