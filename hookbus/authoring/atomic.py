"""Writing a hook folder into a hooks folder without ever following a symlink: staged in a
hidden temporary folder inside the hooks folder (``O_EXCL | O_NOFOLLOW``, relative to the
folder's descriptor), fsynced, then renamed into place in one step. A writer that died leaves
only a stale staging folder, removed by the next write.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import Literal

from hookbus.audit.report import Finding

#: Prefix of the temporary folders a write stages in (hidden: loaders skip it).
STAGING_PREFIX = ".hookbus-write-"
#: A staging folder older than this (seconds) belongs to a writer that died; it is removed.
STALE_STAGING_S = 600

RefusalCode = Literal[
    "policy", "invalid", "audit", "exists", "unsafe-path", "io-error", "ownership"
]


class Refused(Exception):
    def __init__(self, code: RefusalCode, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


def _symlink_finding(file: str, message: str) -> Finding:
    return Finding("symlink", "critical", file, None, message)


def check_hooks_dir(
    root: Path, name: str, *, replace: bool
) -> tuple[RefusalCode, str, list[Finding]] | None:
    """Refuse a hooks folder that is a symlink, holds one, or already has this hook."""
    try:
        st = root.lstat()
    except FileNotFoundError:
        return None  # created (component by component, no symlinks) by the write
    except OSError as exc:
        return ("io-error", f"cannot inspect the hooks folder {root}: {exc.strerror}", [])
    if stat.S_ISLNK(st.st_mode):
        return (
            "unsafe-path",
            f"the hooks folder {root} is a symlink; writes never follow symlinks "
            "(point hooks_dir at the real folder)",
            [_symlink_finding(str(root), "the hooks folder itself is a symlink")],
        )
    if not stat.S_ISDIR(st.st_mode):
        return ("unsafe-path", f"{root} is not a folder", [])
    links: list[Finding] = []
    try:
        with os.scandir(root) as entries:
            for entry in entries:
                if entry.is_symlink():
                    points_to = "?"
                    with contextlib.suppress(OSError):
                        points_to = os.readlink(entry.path)
                    links.append(
                        _symlink_finding(
                            entry.name,
                            f"a symlink in the hooks folder (to {points_to!r}): replace it with a "
                            "real folder before writing hooks here",
                        )
                    )
    except OSError as exc:
        return ("io-error", f"cannot list the hooks folder {root}: {exc.strerror}", [])
    if links:
        return (
            "unsafe-path",
            f"the hooks folder {root} holds {len(links)} symlink(s); nothing is written into a "
            "folder whose entries may lead elsewhere",
            links,
        )
    for other in (f"{name}.yaml", f"{name}.yml"):
        if os.path.lexists(root / other):
            return ("exists", f"a single-file hook {other} already exists; remove it first", [])
    target = root / name
    if os.path.lexists(target):
        if not replace:
            return (
                "exists",
                f"a hook named {name!r} already exists in {root}; pass --replace "
                "(replace=true) to overwrite it",
                [],
            )
        if not target.is_dir() or target.is_symlink():
            return ("unsafe-path", f"{target} is not a hook folder; refusing to replace it", [])
    return None


def _mkdirs_no_symlinks(root: Path) -> None:
    """Create ``root`` and missing parents, refusing any existing component that is a link."""
    missing: list[Path] = []
    current = root.absolute()
    while not os.path.lexists(current):
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for path in reversed(missing):
        os.mkdir(path, 0o755)
        if path.is_symlink():  # pragma: no cover - a race with another process
            raise Refused("unsafe-path", f"{path} turned into a symlink while being created")


_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


def _write_file(dir_fd: int, name: str, text: str, mode: int) -> None:
    """Temp file + fsync + rename, relative to ``dir_fd``, never following a link."""
    tmp = f".{name}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW, mode, dir_fd=dir_fd)
    try:
        data = text.encode("utf-8")
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fchmod(fd, mode)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def atomic_write(root: Path, name: str, files: dict[str, str], *, replace: bool) -> bool:
    """Stage the hook in a hidden temp folder inside ``root``, then rename it into place.
    Returns whether an existing hook was replaced."""
    _mkdirs_no_symlinks(root)
    if root.is_symlink():
        raise Refused("unsafe-path", f"the hooks folder {root} is a symlink")
    _remove_stale_staging(root)
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=root))
    try:
        hook_dir = staging / name
        os.mkdir(hook_dir, 0o755)
        dir_fd = os.open(hook_dir, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW)
        try:
            for rel, text in sorted(files.items()):
                mode = 0o755 if rel.startswith("handler.") else 0o644
                _write_file(dir_fd, rel, text, mode)
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        target = root / name
        replaced = False
        if os.path.lexists(target):
            if not replace:
                raise Refused("exists", f"a hook named {name!r} appeared in {root} meanwhile")
            if target.is_symlink() or not target.is_dir():
                raise Refused("unsafe-path", f"{target} is not a hook folder")
            old = staging / f"{name}.old"
            os.rename(target, old)
            replaced = True
            try:
                os.rename(hook_dir, target)
            except OSError:
                os.rename(old, target)  # put the previous hook back before cleaning up
                raise
        else:
            os.rename(hook_dir, target)
        _fsync_dir(root)
        return replaced
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _remove_stale_staging(root: Path) -> None:
    """Staging folders left by a writer that died (older than :data:`STALE_STAGING_S`):
    the bundle would otherwise carry them."""
    now = time.time()
    with contextlib.suppress(OSError), os.scandir(root) as entries:
        for entry in entries:
            if not entry.name.startswith(STAGING_PREFIX) or not entry.is_dir(follow_symlinks=False):
                continue
            with contextlib.suppress(OSError):
                if now - entry.stat(follow_symlinks=False).st_mtime > STALE_STAGING_S:
                    shutil.rmtree(entry.path, ignore_errors=True)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY | _O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
