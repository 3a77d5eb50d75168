"""A worker's local copy of bundle files: written once per version, reused, cleaned up.

Workers execute what they cache, so where the cache lives and who can write there matters
as much as the bundle's own checks.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hookbus.bus.bundle_pack import Bundle, check_relative
from hookbus.errors import BundleError

if TYPE_CHECKING:
    from hookbus.bus.settings import Settings


def default_cache_root(settings: Settings) -> Path:
    """Where workers write bundle files: ``<reload.data_dir>/bundles/<ns>`` or a private
    folder under the system temp dir."""
    if settings.reload.data_dir:
        base = Path(settings.reload.data_dir).expanduser() / "bundles"
    else:
        base = Path(tempfile.gettempdir()) / f"hookbus-{os.getuid()}" / "bundles"
    return base / settings.namespace


def check_private(folder: Path) -> None:
    """Refuse a cache folder other local users could write to (or swap out).

    Workers execute the files they cache, so under a shared temp dir the folder and its
    ancestors must belong to this user (or root) and not be writable by group or others, up
    to a sticky shared folder such as ``/tmp`` or a folder of root's.
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


def materialise(bundle: Bundle, cache_root: Path, *, private: bool = False) -> Path:
    """Write a bundle's files under ``cache_root/<version>`` (once; reused afterwards).

    Several workers on one host may do this at once: each writes a private temporary folder
    and renames it into place, so the version folder is complete whenever it exists. With
    ``private`` (the default cache under the system temp dir) the folder's ownership and
    permissions are checked first (:func:`check_private`).
    """
    cache_root.mkdir(parents=True, exist_ok=True, mode=0o700)
    if private:
        check_private(cache_root)
    final = cache_root / bundle.version
    if final.is_dir():
        with contextlib.suppress(OSError):
            os.utime(final)
        return final
    tmp = Path(tempfile.mkdtemp(prefix=f".{bundle.version}.", dir=cache_root))
    try:
        for f in bundle.files:
            rel = check_relative(f.path)
            target = tmp.joinpath(*rel.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, f.mode)
            with os.fdopen(fd, "wb") as fh:
                fh.write(f.data)
            os.chmod(target, f.mode)
        os.chmod(tmp, 0o755)
        try:
            os.rename(tmp, final)
        except OSError:
            if not final.is_dir():
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # removed meanwhile by another worker's clean-up
        return 0.0


def clean_cache(cache_root: Path, *, keep: int, in_use: Sequence[str] = ()) -> list[str]:
    """Remove all but the ``keep`` most recently used version folders (never ``in_use``)."""
    if not cache_root.is_dir():
        return []
    dirs = [p for p in cache_root.iterdir() if p.is_dir() and not p.name.startswith(".")]
    dirs.sort(key=_mtime, reverse=True)
    removed = []
    for p in dirs[max(1, keep) :]:
        if p.name in in_use:
            continue
        shutil.rmtree(p, ignore_errors=True)
        removed.append(p.name)
    return removed
