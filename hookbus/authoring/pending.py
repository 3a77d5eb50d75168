"""Hooks an agent wrote under ``autonomy.level = "supervised"`` wait for an operator in
``<hooks_dir>/.pending/<name>/``.

The loader skips hidden folders, so a pending hook is never loaded, validated into a reload
or run: nothing needs to remember to leave it out. :func:`list_pending` names them (``hookbus
reload`` lists them with the word *pending*); :func:`approve_pending` moves one into the hooks
folder in one rename (replacing the approved version it updates), :func:`reject_pending`
deletes it. The bundle never needs to carry :data:`PENDING_DIRNAME`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import tomlkit

from hookbus.bus import ids
from hookbus.errors import HookExists, HookNotFound, ManifestError, PendingHookChanged
from hookbus.hooks.manifest_model import MAX_SCOPE, OPERATOR, SCOPE_RE, TOML_FILENAME

#: The folder, inside a hooks folder, where pending hooks wait.
PENDING_DIRNAME = ".pending"


@dataclass(frozen=True)
class PendingHook:
    """One hook waiting for approval: its name, folder, author and content digest."""

    name: str
    path: Path
    author: str
    sha256: str


def pending_dir(hooks_dir: Path | str) -> Path:
    return Path(hooks_dir) / PENDING_DIRNAME


def manifest_author(folder: Path) -> str:
    """The ``author`` a hook folder's ``HOOK.toml`` names (``operator`` when it names none or
    cannot be read: an unknown author is protected like an operator)."""
    try:
        data = tomllib.loads((folder / TOML_FILENAME).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return OPERATOR
    hook = data.get("hook")
    if isinstance(hook, dict) and "author" in hook:
        data = hook
    author = data.get("author", OPERATOR)
    return author if isinstance(author, str) else OPERATOR


def folder_digest(folder: Path) -> str:
    """SHA-256 over the folder's relative file names and contents (what approval covers)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        rel = path.relative_to(folder).as_posix()
        digest.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def list_pending(hooks_dir: Path | str) -> list[PendingHook]:
    """Every pending hook of ``hooks_dir``, in name order (empty when there is none)."""
    root = pending_dir(hooks_dir)
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return []
    out: list[PendingHook] = []
    for entry in entries:
        if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
            continue
        folder = Path(entry.path)
        out.append(PendingHook(entry.name, folder, manifest_author(folder), folder_digest(folder)))
    return out


def _pending(hooks_dir: Path | str, name: str) -> Path:
    folder = pending_dir(hooks_dir) / name
    if name.startswith(".") or "/" in name or not folder.is_dir() or folder.is_symlink():
        raise HookNotFound(name, f"the pending hooks of {hooks_dir}")
    return folder


def widen_scope(folder: Path, scope: Sequence[str]) -> None:
    """Write ``scope`` (agent ids, or ``*``) into a pending hook's ``HOOK.toml``: the agents
    whose events the hook may act on besides its author's. Only an operator's approval does
    this; an agent's write never carries a scope."""
    manifest = folder / TOML_FILENAME
    bad = [item for item in scope if not SCOPE_RE.match(item)]
    if bad or len(scope) > MAX_SCOPE:
        raise ManifestError(
            str(manifest), "scope", f"give at most {MAX_SCOPE} agent ids or '*', got {bad}"
        )
    try:
        doc = tomlkit.parse(manifest.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomlkit.exceptions.ParseError) as exc:
        raise ManifestError(str(manifest), "scope", f"cannot widen its scope: {exc}") from None
    table = doc.get("hook")
    target = table if isinstance(table, dict) else doc
    target["scope"] = list(scope)
    manifest.write_text(tomlkit.dumps(doc), encoding="utf-8")


#: The shortest prefix of a digest an approval may name (``hooks pending`` prints 12).
MIN_DIGEST_CHARS = 12


def digest_matches(shown: str, actual: str) -> bool:
    """Does ``shown`` (a full sha256, or a prefix of at least :data:`MIN_DIGEST_CHARS`
    hex digits) name ``actual``?"""
    shown = shown.strip().lower()
    return len(shown) >= MIN_DIGEST_CHARS and actual.startswith(shown)


def approve_pending(
    hooks_dir: Path | str,
    name: str,
    *,
    scope: Sequence[str] = (),
    expect_sha256: str | None = None,
) -> PendingHook:
    """Move a pending hook into the hooks folder (replacing the approved version of the same
    author, if any), its scope widened to ``scope`` when given. Refuses to replace a hook
    somebody else wrote.

    ``expect_sha256``: the digest of the copy the operator read. The pending copy is first
    moved aside, where no agent's write reaches it, and its digest compared there: another
    copy is refused (:class:`~hookbus.errors.PendingHookChanged`), put back unless a newer
    write took its place, so what is approved is exactly what was read."""
    folder = _pending(hooks_dir, name)
    staged = pending_dir(hooks_dir) / f".approving-{name}-{ids.token(16)}"
    os.rename(folder, staged)
    try:
        digest = folder_digest(staged)
        if expect_sha256 is not None and not digest_matches(expect_sha256, digest):
            raise PendingHookChanged(name, expect_sha256, digest)
        if scope:
            widen_scope(staged, scope)
        approved = PendingHook(
            name, Path(hooks_dir) / name, manifest_author(staged), folder_digest(staged)
        )
        _install(hooks_dir, staged, approved)
    except BaseException:
        if staged.exists():
            if os.path.lexists(folder):
                shutil.rmtree(staged, ignore_errors=True)  # a newer write replaced it
            else:
                os.rename(staged, folder)
        raise
    with contextlib.suppress(OSError):
        pending_dir(hooks_dir).rmdir()  # only when it is empty now
    return approved


def _install(hooks_dir: Path | str, staged: Path, approved: PendingHook) -> None:
    target = approved.path
    if os.path.lexists(target):
        if target.is_symlink() or not target.is_dir():
            raise HookExists(str(target))
        if manifest_author(target) != approved.author:
            raise HookExists(f"{target} (written by {manifest_author(target)})")
        old = pending_dir(hooks_dir) / f".old-{approved.name}-{ids.token(32)}"
        os.rename(target, old)
        try:
            os.rename(staged, target)
        except OSError:
            os.rename(old, target)
            raise
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(staged, target)


def reject_pending(hooks_dir: Path | str, name: str) -> PendingHook:
    """Delete a pending hook; the approved version (if any) stays as it is."""
    folder = _pending(hooks_dir, name)
    rejected = PendingHook(name, folder, manifest_author(folder), folder_digest(folder))
    shutil.rmtree(folder)
    with contextlib.suppress(OSError):
        pending_dir(hooks_dir).rmdir()
    return rejected
