"""A worker's local copy of bundle files: private, content-addressed, checked at every load.

Workers execute what they cache, so the cache is guarded as carefully as the bundle itself:

- it lives in a folder of the worker's own user, mode 0700 (``<reload.data_dir>/bundles`` or
  ``$XDG_CACHE_HOME/hookbus/bundles``, never a predictable folder under the shared temp dir),
  and a folder another user owns or could write to is refused;
- each bundle is written once under its full content hash and left read-only;
- every time a worker loads a bundle from the cache (a reload, a rollback, a restart), each
  file is compared with the digests of the signed bundle, and no file may be missing or
  added. A mismatch is logged, the folder is removed and rewritten from the bytes just
  fetched; if it still does not match, the load is refused. A hook that rewrote another
  hook's cached file therefore never gets that file run by a later load.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import stat
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hookbus.bundles.check import check_relative
from hookbus.bundles.model import EXEC_MODE, Bundle, BundleFile
from hookbus.bus import trees
from hookbus.bus.trees import walk
from hookbus.errors import BundleError

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings

log = logging.getLogger(__name__)

#: Mode of the cache folders: the worker's user only.
CACHE_DIR_MODE = 0o700
#: Modes of cached files and folders once written: nobody writes to them afterwards.
READONLY_EXEC_MODE = 0o555
READONLY_FILE_MODE = 0o444
READONLY_DIR_MODE = 0o555


def default_cache_root(settings: Settings) -> Path:
    """``<reload.data_dir>/bundles/<ns>``, else ``$XDG_CACHE_HOME/hookbus/bundles/<ns>``
    (``~/.cache`` by default), else a fresh private folder under the temp dir (a process
    with no home folder)."""
    if settings.reload.data_dir:
        return Path(settings.reload.data_dir).expanduser() / "bundles" / settings.namespace
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    try:
        base = Path(xdg) if xdg else Path.home() / ".cache"
    except RuntimeError:  # no HOME and no passwd entry
        return Path(tempfile.mkdtemp(prefix="hookbus-cache-")) / settings.namespace
    return base / "hookbus" / "bundles" / settings.namespace


def check_private(folder: Path) -> None:
    """Refuse a cache folder other local users could write to (or swap out).

    The folder and its ancestors must belong to this user (or root) and not be writable by
    group or others, up to a sticky shared folder such as ``/tmp`` or a folder of root's.
    """
    uid = os.getuid()
    path = folder.resolve()
    while True:
        st = path.lstat()
        shared_sticky = st.st_mode & 0o002 and st.st_mode & stat.S_ISVTX
        if shared_sticky and st.st_uid in (0, uid):
            return  # a sticky shared folder such as /tmp: nobody can swap our entries
        if st.st_uid not in (0, uid):
            raise BundleError(
                f"bundle cache {folder}: {path} belongs to another user (uid {st.st_uid}); "
                "set reload.data_dir to a private folder"
            )
        if st.st_mode & 0o022:
            raise BundleError(
                f"bundle cache {folder}: {path} is writable by other users; "
                "fix its permissions or set reload.data_dir to a private folder"
            )
        if st.st_uid == 0 and uid != 0:
            return  # root's folder, not writable by others: trusted from here up
        if path.parent == path:
            return
        path = path.parent


def prepare_root(cache_root: Path) -> Path:
    """Create ``cache_root`` (mode 0700), make sure this user owns it and nobody else can
    enter it, and check its ancestors (:func:`check_private`)."""
    cache_root.mkdir(parents=True, exist_ok=True, mode=CACHE_DIR_MODE)
    st = cache_root.lstat()
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise BundleError(f"bundle cache {cache_root} is not a folder (a link?); remove it")
    if st.st_uid != os.getuid():
        raise BundleError(
            f"bundle cache {cache_root} belongs to uid {st.st_uid}, not to this worker's user; "
            "set reload.data_dir to a folder of this user"
        )
    if stat.S_IMODE(st.st_mode) != CACHE_DIR_MODE:
        os.chmod(cache_root, CACHE_DIR_MODE)
    check_private(cache_root)
    return cache_root


def folder_name(bundle: Bundle) -> str:
    """The cache folder of a bundle: its full content hash (content-addressed)."""
    return bundle.meta.content_hash


def mismatches(folder: Path, files: Sequence[BundleFile]) -> list[str]:
    """What in ``folder`` differs from ``files``: changed, missing, retyped or extra entries
    (empty when the folder holds exactly the bundle)."""
    expected = {f.path: f for f in files}
    wanted_dirs = {str(p) for f in files for p in Path(f.path).parents if str(p) != "."}
    found: list[str] = []
    seen: set[str] = set()
    for here, dirnames, filenames in walk(folder):
        kept = []
        for name in dirnames:
            rel = (here / name).relative_to(folder).as_posix()
            if (here / name).is_symlink() or rel not in wanted_dirs:
                found.append(f"{rel}/: not in the bundle")
            else:
                kept.append(name)
        dirnames[:] = kept
        for name in filenames:
            path = here / name
            rel = path.relative_to(folder).as_posix()
            entry = expected.get(rel)
            st = path.lstat()
            if entry is None or not stat.S_ISREG(st.st_mode):
                found.append(f"{rel}: not in the bundle")
                continue
            seen.add(rel)
            if bool(st.st_mode & 0o111) != (entry.mode == EXEC_MODE):
                found.append(f"{rel}: executable bit changed")
            if hashlib.sha256(path.read_bytes()).hexdigest() != entry.sha256:
                found.append(f"{rel}: content differs from the signed digest")
    found.extend(f"{p}: missing" for p in sorted(set(expected) - seen))
    return found


def materialise(bundle: Bundle, cache_root: Path, *, private: bool = True) -> Path:
    """The checked cache folder of ``bundle``, written now if needed.

    An existing folder is reused only when :func:`mismatches` finds nothing; otherwise it is
    removed and rewritten from ``bundle``'s bytes, and checked again (:class:`BundleError`
    when it still differs). Several workers on one host may do this at once: each writes a
    private temporary folder and renames it into place. ``private=False`` skips the
    ownership checks of the root (tests on odd temp dirs only).
    """
    if private:
        prepare_root(cache_root)
    else:
        cache_root.mkdir(parents=True, exist_ok=True, mode=CACHE_DIR_MODE)
    final = cache_root / folder_name(bundle)
    if final.is_dir():
        problems = mismatches(final, bundle.files)
        if not problems:
            with contextlib.suppress(OSError):
                os.utime(final)
            return final
        log.warning(
            "cached bundle %s was modified (%s); rewriting it from the fetched bundle",
            bundle.version,
            "; ".join(problems[:5]),
        )
        remove_tree(final)
    _write(bundle, cache_root, final)
    problems = mismatches(final, bundle.files)
    if problems:
        raise BundleError(
            f"bundle {bundle.version}: the cache folder {final} does not hold the bundle after "
            f"writing it ({'; '.join(problems[:5])}); something else writes there, refused"
        )
    return final


def _write(bundle: Bundle, cache_root: Path, final: Path) -> None:
    tmp = Path(tempfile.mkdtemp(prefix=f".{bundle.version}.", dir=cache_root))
    try:
        for f in bundle.files:
            rel = check_relative(f.path)
            target = tmp.joinpath(*rel.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(f.data)
            os.chmod(target, READONLY_EXEC_MODE if f.mode == EXEC_MODE else READONLY_FILE_MODE)
        for dirpath in reversed([here for here, _dirs, _files in walk(tmp)]):
            os.chmod(dirpath, READONLY_DIR_MODE)
        try:
            os.rename(tmp, final)
        except OSError:
            if not final.is_dir():
                raise
            remove_tree(tmp)  # another worker won the race; its copy is checked by the caller
    except BaseException:
        remove_tree(tmp)
        raise


def remove_tree(path: Path) -> None:
    """Remove a cache folder, read-only parts included, however deep; one that cannot be
    removed is moved aside (a dot name, never served), so its name can be written anew."""
    if trees.remove_tree(path) or path.name.startswith("."):
        return
    aside = path.with_name(f".discarded-{path.name}-{os.getpid()}-{int(time.time() * 1000)}")
    try:
        os.rename(path, aside)
    except OSError as exc:
        log.warning("cache folder %s can be neither removed nor moved aside: %s", path, exc)
        return
    log.warning("cache folder %s could not be removed; moved aside to %s", path, aside.name)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # removed meanwhile by another worker's clean-up
        return 0.0


def clean_cache(cache_root: Path, *, keep: int, in_use: Sequence[str] = ()) -> list[str]:
    """Remove all but the ``keep`` most recently used bundle folders (never ``in_use``)."""
    if not cache_root.is_dir():
        return []
    dirs = [p for p in cache_root.iterdir() if p.is_dir() and not p.name.startswith(".")]
    dirs.sort(key=_mtime, reverse=True)
    removed = []
    for p in dirs[max(1, keep) :]:
        if p.name in in_use:
            continue
        remove_tree(p)
        removed.append(p.name)
    return removed
