"""The hook audit: what a hook folder may contain and what its commands may do.

``hookbus hooks audit``, ``hookbus reload`` (via :func:`audit_folder`) and self-authoring (via
:func:`audit_files` of :mod:`hookbus.audit.in_memory`, on content still in memory) all run the
same rules. Each finding has a rule id, a severity (critical findings block a reload; high ones
also block a self-authored hook under the ``supervised`` autonomy level), the file and line,
and a message saying what to change. The rule table is :data:`RULES`; ``docs/security.md``
explains each rule.

This module finds and reads what a hooks folder holds (never following symlinks, bounded in
files and bytes); :mod:`hookbus.audit.engine` applies the rules.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hookbus.audit.autonomy import AutonomyPolicy, severity_rank
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
from hookbus.audit.in_memory import audit_files
from hookbus.audit.manifest_raw import parse_manifest_text
from hookbus.audit.report import AuditReport, Finding, HookSource
from hookbus.audit.ruleset import AUTONOMY_RULES, RULES
from hookbus.audit.walk import (
    flag_too_large,
    flag_world_writable,
    is_regular,
    iter_hook_entries,
    left_out,
    read_nofollow,
    referenced_siblings,
    walk,
)

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings

__all__ = [
    "AUTONOMY_RULES",
    "RULES",
    "AuditReport",
    "Finding",
    "audit_files",
    "audit_folder",
    "audit_hook",
    "parse_manifest_text",
]

logger = logging.getLogger(__name__)


# --- on disk --------------------------------------------------------------------------


def _audit_dir_hook(
    folder: Path, display_name: str, pol: AutonomyPolicy, hooks_refs: tuple[str, ...]
) -> AuditReport:
    prefix = f"{display_name}/"
    collector = Collector(display_name)
    files, names = walk(folder, prefix, pol, collector)
    manifest_rel = next((m for m in MANIFEST_NAMES if m in files), None)
    name = display_name
    src = HookSource(
        name=name,
        prefix=prefix,
        manifest_file=f"{prefix}{manifest_rel}" if manifest_rel else None,
        manifest_text=decode_text(files[manifest_rel]) if manifest_rel else None,
        files={r: d for r, d in files.items() if r != manifest_rel},
        local_names=names,
    )
    skip = False
    try:
        skip, _ = audit_source(src, pol, hooks_refs, collector)
    except Exception as exc:
        logger.exception("audit failed on %s", folder)
        collector.add(
            "audit-internal",
            "high",
            prefix,
            None,
            f"the audit failed ({type(exc).__name__}); review by hand",
        )
    report = finish_report(
        name, collector, pol, skip, src.manifest_file or prefix, src.manifest_text
    )
    if manifest_rel is None:
        report.hooks = []  # a folder of shared files (``_scripts/``), not a hook
    return report


def _audit_single_file(
    path: Path,
    hooks_dir: Path,
    pol: AutonomyPolicy,
    hooks_refs: tuple[str, ...],
    *,
    with_siblings: bool = False,
) -> AuditReport:
    """A ``<name>.yaml`` hook: the file itself (and, audited alone, the scripts it names)."""
    name = path.stem
    collector = Collector(name)
    display = path.name
    try:
        st = path.lstat()
        if st.st_mode & stat.S_IWOTH:
            flag_world_writable(collector, display)
        if st.st_size > pol.max_file_bytes:
            flag_too_large(collector, display, st.st_size, pol.max_file_bytes)
            return finish_report(name, collector, pol, False, display, None)
        text = decode_text(read_nofollow(path, pol.max_file_bytes))
    except OSError as exc:
        collector.add("audit-internal", "high", display, None, f"cannot read ({exc.strerror})")
        return finish_report(name, collector, pol, False, display, None)
    local = {e.name for e in iter_hook_entries(hooks_dir) if is_regular(e)}
    siblings: dict[str, bytes] = {}
    if with_siblings:
        siblings = referenced_siblings(text, display, hooks_dir, local, pol)
    src = HookSource(name, "", display, text, siblings, frozenset(local))
    skip = False
    try:
        skip, _ = audit_source(src, pol, hooks_refs, collector)
    except Exception as exc:
        logger.exception("audit failed on %s", path)
        collector.add(
            "audit-internal", "high", display, None, f"the audit failed ({type(exc).__name__})"
        )
    return finish_report(name, collector, pol, skip, display, text)


def _is_hook_folder(path: Path) -> bool:
    return any((path / m).is_file() and not (path / m).is_symlink() for m in MANIFEST_NAMES)


def audit_folder(
    hooks_dir: Path | str,
    *,
    settings: Settings | None = None,
    policy: AutonomyPolicy | None = None,
) -> AuditReport:
    """Audit a hooks folder (every hook in it), one hook folder, or one ``<name>.yaml`` file.

    Everything a bundle would carry is looked at: hook folders, single-file hooks, loose
    files next to them and hidden or ``_``-prefixed folders (which the loader skips but the
    bundle packs). ``hookbus reload`` refuses to publish when ``report.critical`` is set."""
    pol = resolve_policy(settings, policy)
    root = Path(hooks_dir)
    report = AuditReport()
    try:
        root_st = root.lstat()
    except OSError:
        return report  # nothing to audit; the loader reports a missing folder
    if stat.S_ISREG(root_st.st_mode) and root.name.endswith(SINGLE_FILE_SUFFIXES):
        return _audit_single_file(
            root, root.parent, pol, hooks_dir_refs(root.parent), with_siblings=True
        )
    if stat.S_ISREG(root_st.st_mode) and root.name in MANIFEST_NAMES:
        root = root.parent
    if _is_hook_folder(root):
        report = _audit_dir_hook(root, root.name, pol, hooks_dir_refs(root.parent))
        if stat.S_ISLNK(root_st.st_mode):
            # in its hooks folder this hook is a symlink: the walk of the folder flags it too
            target = "?"
            with contextlib.suppress(OSError):
                target = os.readlink(root)
            report.findings.insert(
                0,
                Finding(
                    "symlink",
                    "critical",
                    root.name,
                    None,
                    f"this hook folder is a symlink (to {target!r}): "
                    "replace it with the real folder",
                    root.name,
                ),
            )
        return report
    # a hooks folder that is itself a symlink is the operator's layout: followed
    refs = hooks_dir_refs(root)
    loose = Collector(None)
    loose_files: dict[str, bytes] = {}
    loose_names: set[str] = set()
    for entry in iter_hook_entries(root):
        if left_out(entry):
            continue  # never packed, so never run: not audited either
        path = Path(entry.path)
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISLNK(st.st_mode):
            try:
                target = os.readlink(path)
            except OSError:
                target = "?"
            loose.add(
                "symlink",
                "critical",
                entry.name,
                None,
                f"a symlink in the hooks folder (to {target!r}): replace it with a real folder or "
                "file; symlinks can point anywhere",
            )
            continue
        if stat.S_ISDIR(st.st_mode):
            report.extend(_audit_dir_hook(path, entry.name, pol, refs))
        elif stat.S_ISREG(st.st_mode) and entry.name.endswith(SINGLE_FILE_SUFFIXES):
            report.extend(_audit_single_file(path, root, pol, refs))
        elif stat.S_ISREG(st.st_mode):
            loose_names.add(entry.name)
            if st.st_mode & stat.S_IWOTH:
                flag_world_writable(loose, entry.name)
            if st.st_size > pol.max_file_bytes:
                flag_too_large(loose, entry.name, st.st_size, pol.max_file_bytes)
                continue
            try:
                loose_files[entry.name] = read_nofollow(path, pol.max_file_bytes)
            except OSError as exc:
                loose.add(
                    "audit-internal", "high", entry.name, None, f"cannot read ({exc.strerror})"
                )
        else:
            loose.add(
                "special-file",
                "critical",
                entry.name,
                None,
                "not a regular file (FIFO, socket or device): remove it",
            )
    if loose_files:
        src = HookSource("", "", None, None, loose_files, frozenset(loose_names))
        try:
            audit_source(src, pol, refs, loose)
        except Exception as exc:
            logger.exception("audit failed on loose files of %s", root)
            loose.add(
                "audit-internal", "high", "", None, f"the audit failed ({type(exc).__name__})"
            )
    if loose.findings:
        # loose files belong to no hook: the operator's skip applies, a manifest's cannot
        report.extend(finish_report("", loose, pol, False, "", None))
        report.hooks.remove("")
    report.findings.sort(key=lambda f: (severity_rank(f.severity), f.file, f.line or 0, f.rule))
    return report


def audit_hook(
    manifest: Any,
    *,
    settings: Settings | None = None,
    policy: AutonomyPolicy | None = None,
) -> list[Finding]:
    """Audit one loaded hook (a ``HookManifest``: its ``folder`` and ``source_path``)."""
    pol = resolve_policy(settings, policy)
    source = Path(getattr(manifest, "source_path", "") or "")
    folder = Path(getattr(manifest, "folder", "") or source.parent)
    if source.name.endswith(SINGLE_FILE_SUFFIXES):
        return _audit_single_file(
            source, folder, pol, hooks_dir_refs(folder), with_siblings=True
        ).findings
    return _audit_dir_hook(folder, folder.name, pol, hooks_dir_refs(folder.parent)).findings
