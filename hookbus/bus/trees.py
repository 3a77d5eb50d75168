"""Walking and removing folder trees of any depth.

A tree on disk may be thousands of folders deep: a hook may build one (``mkdir -p`` of a
long path), and a cache or scratch folder holding it must still be checked and removed.
Python 3.11's ``os.walk`` and ``shutil.rmtree`` recurse once per level and raise
``RecursionError`` (not ``OSError``) past about a thousand, which escaped the callers'
error handling: a worker died at start on its own cache. These walk with an explicit stack
and remove with coreutils' ``rm`` when ``rmtree`` cannot.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path


def walk(root: Path) -> Iterator[tuple[Path, list[str], list[str]]]:
    """``(folder, folder names, other names)`` for ``root`` and every folder under it, top
    down, links never followed (a link is an "other name"); pruning the folder names in place
    skips them, as with ``os.walk``. An unreadable folder is skipped."""
    stack = [root]
    while stack:
        top = stack.pop()
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        folders: list[str] = []
        others: list[str] = []
        for entry in entries:
            try:
                is_folder = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_folder = False
            (folders if is_folder else others).append(entry.name)
        yield top, folders, others
        stack.extend(top / name for name in reversed(folders))


def remove_tree(path: Path) -> bool:
    """Remove ``path`` and everything under it, read-only folders included (best effort).
    True when it is gone."""
    if not os.path.lexists(path):
        return True
    if path.is_dir() and not path.is_symlink():
        for folder, _folders, _others in walk(path):
            with contextlib.suppress(OSError):
                os.chmod(folder, 0o700)
    try:
        shutil.rmtree(path, ignore_errors=True)
    except RecursionError:
        subprocess.run(["rm", "-rf", "--", str(path)], check=False, capture_output=True)
    return not os.path.lexists(path)


#: What a tree's entries say about their contents: a write, a chmod, a rename or a new entry
#: changes one of these (``st_ctime`` cannot be set back by an unprivileged process).
Fingerprint = frozenset[tuple[str, int, int, int, int, int]]


def fingerprint(root: Path) -> Fingerprint:
    """``(path, inode, size, mode, mtime, ctime)`` of ``root`` and every entry under it,
    links not followed: equal fingerprints mean nothing in the tree was written, added,
    removed, renamed or re-moded in between (without hashing a byte)."""
    found: set[tuple[str, int, int, int, int, int]] = set()
    for folder, folders, others in walk(root):
        for name in (".", *folders, *others):
            path = folder / name
            try:
                st = os.lstat(path)
            except OSError:
                continue
            found.add(
                (str(path), st.st_ino, st.st_size, st.st_mode, st.st_mtime_ns, st.st_ctime_ns)
            )
    return frozenset(found)


def read_only(root: Path) -> bool:
    """``root`` is a folder nobody may write to (its mode has no write bit): a sealed copy,
    such as a worker's bundle cache, as opposed to a folder someone edits."""
    try:
        return not os.stat(root).st_mode & 0o222
    except OSError:
        return False
