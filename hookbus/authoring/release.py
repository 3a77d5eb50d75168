"""Release a hooks folder to the fleet: read it once, validate, audit, sign, store, announce.

This is the gate in front of :mod:`hookbus.bundles.store`: the bus stores bytes it is
handed and knows nothing of manifests or the audit, so the decision whether a folder may
become the fleet's hook set is made here, where the loader and the audit may be imported.
``hookbus reload``, the MCP tool ``hooks_reload`` and ``hookbus dev`` all release through
:func:`release_folder`.

The folder is read from disk exactly once (:func:`~hookbus.bundles.pack.collect_files`).
Validation and the audit run on a private copy written from those bytes, and those same
bytes are signed and pushed: an edit to the folder while a reload runs can never slip
unaudited bytes into the bundle.

Agent-written hooks waiting for approval (``.pending/``, :mod:`hookbus.authoring.pending`) are
never pushed; each one left out is named, with the word *pending*.

By default a folder in which any hook fails to validate or load is refused as a whole,
naming each hook and its error: a guard with a typo must not vanish silently while the
rest of the fleet goes on. ``allow_partial`` leaves the failing hooks out instead (logged),
except hooks marked ``guard = true``, which are never left out.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from hookbus.audit.folder import Finding, audit_folder, parse_manifest_text
from hookbus.authoring.pending import PENDING_DIRNAME, folder_digest, list_pending
from hookbus.bundles import history, signing, store
from hookbus.bundles.check import check_relative, content_hash
from hookbus.bundles.model import AuditSummary, BundleFile, BundleMeta
from hookbus.bundles.pack import collect_files
from hookbus.bundles.store import PushResult, store_and_announce
from hookbus.bus.ids import user_at_host
from hookbus.bus.keys import Keys
from hookbus.errors import BundleError, HookBusError, SecurityViolation
from hookbus.hooks.loader import Problem, deadline_warnings, load_hooks

if TYPE_CHECKING:
    import redis
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from hookbus.bus.settings.loader import Settings
    from hookbus.hooks.manifest import HookManifest

log = logging.getLogger(__name__)

#: Manifest files looked at to tell whether a hook that failed to load is a guard.
_MANIFEST_NAMES = ("HOOK.toml", "HOOK.md")
#: A ``guard = true`` line (TOML or YAML), looked for when a manifest does not parse.
_GUARD_LINE = re.compile(r"^\s*guard\s*[=:]\s*true\b", re.MULTILINE | re.IGNORECASE)
#: Stands for "read ``$HOOKBUS_SIGNING_KEY_FILE``" as the default of ``signing_key``.
FROM_ENV = "env"


def default_who() -> str:
    """``user@host`` of this process, recorded as the pusher when none is given."""
    return user_at_host()


def _finding_line(finding: Finding) -> str:
    where = finding.file or ""
    if finding.line:
        where = f"{where}:{finding.line}"
    return f"{finding.severity} {finding.rule} {where}: {finding.message}".replace("  ", " ")


def _write_copy(files: Sequence[BundleFile], root: Path) -> None:
    """Write the in-memory bundle into ``root`` (a private temp folder) as it will run."""
    for f in files:
        target = root.joinpath(*check_relative(f.path).parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(f.data)
        os.chmod(target, f.mode)


def _entry_of(path: str | Path, copy: Path) -> str | None:
    """The top-level entry of the hooks folder (hook folder or ``x.yaml``) ``path`` is in."""
    try:
        rel = Path(path).resolve().relative_to(copy.resolve())
    except ValueError:
        return None
    return rel.parts[0] if rel.parts else None


def _is_guard(copy: Path, entry: str) -> bool:
    """Whether the hook at ``entry`` is marked ``guard = true``. When the manifest is too
    broken to parse, any line that reads like ``guard = true`` / ``guard: true`` counts."""
    path = copy / entry
    candidates = [path / n for n in _MANIFEST_NAMES] if path.is_dir() else [path]
    for manifest in candidates:
        if not manifest.is_file():
            continue
        text = manifest.read_text(encoding="utf-8", errors="replace")
        try:
            data = parse_manifest_text(manifest.name, text)
        except Exception:  # any syntax error of TOML / YAML
            return _GUARD_LINE.search(text) is not None
        if isinstance(data, dict):
            return data.get("guard") is True
        return _GUARD_LINE.search(text) is not None
    return False


def _host_dependent(problem: Problem) -> bool:
    """Problems that say more about the pushing machine than about the hook: ``requires``
    unmet here, a command or module missing here. Workers judge those themselves (and
    report them in their acks), so they are warnings, not refusals."""
    return (
        problem.field == "requires"
        or "is not on PATH" in problem.reason
        or "nor importable" in problem.reason
    )


def _shown(problem: Problem, copy: Path, hooks_dir: Path) -> str:
    """A problem as the operator knows the folder: paths in ``hooks_dir``, not the copy."""
    text = str(problem)
    return text.replace(f"{copy}/", f"{hooks_dir}/").replace(str(copy), str(hooks_dir))


def _gate(
    found: Sequence[Problem], copy: Path, hooks_dir: Path, *, allow_partial: bool
) -> tuple[list[str], set[str]]:
    """(problems as shown, entries to leave out); raises when the folder must be refused."""
    problems = [_shown(p, copy, hooks_dir) for p in found]
    by_entry: dict[str | None, list[str]] = {}
    for p, shown in zip(found, problems, strict=True):
        if not _host_dependent(p):
            by_entry.setdefault(_entry_of(p.path, copy), []).append(shown)
    if not by_entry:
        return problems, set()
    named = [f"hook {entry or '?'}: " + "; ".join(lines) for entry, lines in by_entry.items()]
    if not allow_partial:
        raise BundleError(
            f"{len(by_entry)} hook(s) in {hooks_dir} fail to validate or load; nothing was "
            "published and the fleet keeps its current hooks (fix them, or pass "
            "--allow-partial to leave them out): " + " | ".join(named)
        )
    guards = [e for e in by_entry if e is None or _is_guard(copy, e)]
    if guards:
        raise BundleError(
            f"--allow-partial never leaves out a guard: {', '.join(str(e) for e in guards)} in "
            f"{hooks_dir} fail(s) to load and is marked guard = true (or cannot be read); "
            "nothing was published: " + " | ".join(named)
        )
    for line in named:
        log.warning("--allow-partial: left out %s", line)
    return problems, {e for e in by_entry if e is not None}


def _without_pending(
    files: list[BundleFile], hooks_dir: Path
) -> tuple[list[BundleFile], list[str]]:
    """The files without ``.pending/`` (agent-written hooks waiting for an operator's
    approval never reach the fleet), and the names of the pending hooks, each logged."""
    kept: list[BundleFile] = []
    names: set[str] = set()
    for f in files:
        parts = PurePosixPath(f.path).parts
        if parts[0] == PENDING_DIRNAME:
            if len(parts) > 2 and not parts[1].startswith("."):
                names.add(parts[1])
            continue
        kept.append(f)
    authors = {p.name: p.author for p in list_pending(hooks_dir)}
    for name in sorted(names):
        log.warning(
            "left out pending hook %s (written by %s): approve it with "
            "`hookbus hooks approve %s --hooks-dir %s`, or reject it",
            name,
            authors.get(name, "an agent"),
            name,
            hooks_dir,
        )
    return kept, sorted(names)


def _drop(files: list[BundleFile], entries: set[str]) -> list[BundleFile]:
    return [f for f in files if PurePosixPath(f.path).parts[0] not in entries]


def _build_problems(manifests: Sequence[HookManifest], settings: Settings) -> list[Problem]:
    """Each hook built the way a worker will build it (python hooks aside: building one
    imports its code, which workers judge themselves): a hook that cannot be built is
    refused here, not left for every worker to drop."""
    from hookbus.hooks.actions.kinds import ACTION_KINDS
    from hookbus.hooks.registry import HookRegistry

    registry = HookRegistry.from_settings(settings)
    try:
        built = [m for m in manifests if not ACTION_KINDS[m.action.kind].imports_code]
        errors = {e.hook_id: e.reason for e in registry.replace_dynamic(built)}
    finally:
        registry.close()
    return [
        Problem(path=str(m.source_path), field="action", reason=errors[m.name], hook=m.name)
        for m in built
        if m.name in errors
    ]


def _resolve_key(signing_key: Ed25519PrivateKey | str | None) -> Ed25519PrivateKey | None:
    if isinstance(signing_key, str):
        return signing.signing_key_from_env()
    return signing_key


def guarded_kinds(manifests: Sequence[HookManifest], settings: Settings) -> list[str]:
    """The canonical kinds with an enabled, enforced operator's guard among ``manifests``: a
    hook with ``on_error = "deny"`` or declared ``guard = true``. They fail closed when the
    fleet cannot answer, whatever the kind's configured ``on_timeout``, for every agent: so
    an agent's own hook (which acts on its author's sessions only) does not count."""
    catalogue = settings.catalogue()
    kinds: set[str] = set()
    for manifest in manifests:
        if manifest.mode != "enforce" or not (manifest.on_error == "deny" or manifest.guard):
            continue
        if manifest.agent_authored:
            continue
        for name in manifest.events:
            try:
                kinds.add(catalogue.resolve(name).kind)
            except HookBusError:
                kinds.add(name)
    return sorted(kinds)


def release_folder(
    client: redis.Redis,
    settings: Settings,
    hooks_dir: Path,
    *,
    who: str | None = None,
    allow_partial: bool = False,
    signing_key: Ed25519PrivateKey | str | None = FROM_ENV,
) -> PushResult:
    """Validate, audit, sign, store and announce the hooks folder as the current bundle.

    Raises :class:`BundleError` when the folder cannot be packed (symlinks, size) or a hook
    fails to validate or load (with ``allow_partial``: only when that hook is a guard), and
    :class:`SecurityViolation` when the audit has critical findings; then nothing is stored
    and the fleet keeps its current set. ``signing_key`` defaults to the key named by
    ``$HOOKBUS_SIGNING_KEY_FILE``; without one the bundle is pushed unsigned (logged loudly,
    and ``result.signed_by`` is empty).
    """
    hooks_dir = Path(hooks_dir)
    key = _resolve_key(signing_key)
    files = collect_files(hooks_dir, max_bytes=settings.reload.max_bundle_bytes)
    files, pending = _without_pending(files, hooks_dir)
    left_out: list[str] = []
    with tempfile.TemporaryDirectory(prefix="hookbus-release-") as tmp:
        copy = Path(tmp) / "hooks"
        copy.mkdir()
        _write_copy(files, copy)
        report = load_hooks(copy, catalogue=settings.catalogue())
        found = [*report.problems, *_build_problems(report.enabled, settings)]
        problems, dropped = _gate(found, copy, hooks_dir, allow_partial=allow_partial)
        if dropped:
            left_out = sorted(dropped)
            files = _drop(files, dropped)
            for entry in dropped:
                _remove(copy / entry)
        names = [m.name for m in report.enabled if _entry_of(m.folder, copy) not in dropped]
        kept = [m for m in report.enabled if _entry_of(m.folder, copy) not in dropped]
        guarded = guarded_kinds(kept, settings)
        warnings = [
            f"{w.hook}: {_shown(w, copy, hooks_dir)}"
            for w in deadline_warnings(kept, settings.deadline_ms, settings.catalogue())
        ]
        audit = _audit(copy, settings)
    if audit.critical:
        raise SecurityViolation(
            f"the audit found {audit.critical} critical problem(s) in {hooks_dir}; "
            "nothing was published and the fleet keeps its current hooks: "
            + "; ".join(f for f in audit.findings if f.startswith("critical")),
            audit.findings,
        )
    if key is None:
        signing.warn_unsigned("reload")
    signed_by = signing.key_id(key.public_key()) if key else ""

    def record(version: str) -> tuple[str, int]:
        """The reload's history entry, written before the bundle is signed: the
        signature then covers the history up to it."""
        entry = history.append(
            client,
            settings.namespace,
            action="reload",
            actor=who or default_who(),
            hook="*",
            sha256=content_hash(files),
            extra={
                "version": version,
                "hooks": names,
                "left_out": left_out,
                "signed_by": signed_by,
                "pending": pending,
            },
        )
        return entry.hash, history.length(client, settings.namespace)

    result = store_and_announce(
        client,
        settings,
        files,
        who=who or default_who(),
        source=hooks_dir.resolve(),
        hooks=names,
        problems=problems,
        audit=audit,
        signing_key=key,
        guarded_kinds=guarded,
        record=record,
    )
    return dataclasses.replace(
        result, left_out=left_out, signed_by=signed_by, pending=pending, warnings=warnings
    )


def rollback(
    client: redis.Redis,
    settings: Settings,
    version: str | None = None,
    *,
    who: str | None = None,
    signing_key: Ed25519PrivateKey | str | None = FROM_ENV,
) -> PushResult:
    """Make an earlier bundle current again (see :func:`store.rollback`), recorded in
    the fleet's history and signed as a rollback: the older files get a new sequence, so
    verifying workers take them (an older bundle made current without the signing key is
    refused as older than the one they run)."""
    key = _resolve_key(signing_key)
    previous = store.current_version(client, Keys.for_namespace(settings.namespace))

    def resign(meta: BundleMeta) -> BundleMeta:
        entry = history.append(
            client,
            settings.namespace,
            action="rollback",
            actor=who or default_who(),
            hook="*",
            sha256=meta.content_hash,
            extra={"version": meta.version, "previous": previous},
        )
        anchor = (entry.hash, history.length(client, settings.namespace))
        return store.resigned(client, settings, meta, signing_key=key, anchor=anchor)

    if key is None:
        signing.warn_unsigned("reload")
    return store.rollback(client, settings, version, resign=resign)


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _audit(folder: Path, settings: Settings) -> AuditSummary:
    """Run the security audit on ``folder`` (the private copy); critical findings refuse."""
    report = audit_folder(folder, settings=settings)
    return AuditSummary(
        ran=True,
        skipped=bool(settings.security.skip_security_audit),
        critical=len(report.critical),
        findings=[_finding_line(f) for f in report.findings],
    )


def hook_digest(path: Path) -> str:
    """SHA-256 of a hook as approvals see it: its folder's files, or a single-file hook."""
    path = Path(path)
    if path.is_dir():
        return folder_digest(path)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def record_change(
    settings: Settings,
    *,
    action: str,
    actor: str | None,
    hook: str,
    sha256: str,
    client: redis.Redis | None = None,
    extra: dict[str, object] | None = None,
) -> bool:
    """Append a write, approval or rejection to the fleet's history (``hookbus hooks
    history``). Hooks are written on disk, possibly with no Redis at hand: when Redis cannot
    be reached the change is still made, and this says loudly that it was not recorded
    (False)."""
    from hookbus.bus.connection import connect

    try:
        target = client if client is not None else connect(settings.effective_redis_url)
        history.append(
            target,
            settings.namespace,
            action=action,
            actor=actor or default_who(),
            hook=hook,
            sha256=sha256,
            extra=extra,
        )
    except HookBusError as exc:
        log.warning("%s of hook %s was NOT recorded in the fleet's history: %s", action, hook, exc)
        return False
    return True
