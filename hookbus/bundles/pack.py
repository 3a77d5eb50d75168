"""Packing a hooks folder into bundle files, read from disk exactly once.

:func:`collect_files` takes the folder's own regular files (never following a link, skipping
caches, byte code and version control) with their executable bit and SHA-256, and refuses
links, special files and a folder over the size limit: what the audit sees is exactly what
every worker runs. :func:`dir_version` names a hook set loaded straight from a folder. What
a bundle is lives in :mod:`hookbus.bundles.model`, its checks in
:mod:`hookbus.bundles.check`.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from hookbus.bundles.check import content_hash, version_of
from hookbus.bundles.model import DIR_VERSION_PREFIX, EXEC_MODE, PLAIN_MODE, BundleFile
from hookbus.bus.shipped import ships_dir, ships_file
from hookbus.errors import BundleError


def collect_files(hooks_dir: Path, *, max_bytes: int) -> list[BundleFile]:
    """Every file of ``hooks_dir`` as bundle files, sorted by path.

    Refuses (:class:`BundleError`) symlinks, special files and a total size over
    ``max_bytes``: a bundle must be exactly the folder's own regular files, so that what
    the audit saw is what every worker runs.
    """
    root = Path(hooks_dir)
    if not root.is_dir():
        raise BundleError(f"hooks folder {root} does not exist or is not a folder")
    files: list[BundleFile] = []
    refused: list[str] = []
    total = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        kept_dirs = []
        for name in sorted(dirnames):
            if not ships_dir(name):
                continue
            if (here / name).is_symlink():
                refused.append(f"{(here / name).relative_to(root).as_posix()}: symlink")
                continue
            kept_dirs.append(name)
        dirnames[:] = kept_dirs
        for name in sorted(filenames):
            if not ships_file(name):
                continue
            path = here / name
            rel = path.relative_to(root).as_posix()
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                refused.append(f"{rel}: symlink")
                continue
            if not stat.S_ISREG(st.st_mode):
                refused.append(f"{rel}: not a regular file")
                continue
            total += st.st_size
            if total > max_bytes:
                raise BundleError(
                    f"hooks folder {root} holds more than {max_bytes} bytes "
                    f"(reached at {rel}); remove large files or raise reload.max_bundle_bytes"
                )
            data = path.read_bytes()
            mode = EXEC_MODE if st.st_mode & 0o111 else PLAIN_MODE
            files.append(
                BundleFile(path=rel, mode=mode, sha256=hashlib.sha256(data).hexdigest(), data=data)
            )
    if refused:
        raise BundleError(
            f"hooks folder {root} cannot be bundled: "
            + "; ".join(refused)
            + " (replace links by the files themselves)"
        )
    files.sort(key=lambda f: f.path)
    return files


def dir_version(hooks_dir: Path, *, max_bytes: int) -> str:
    """The version of a hook set loaded straight from a folder: ``dir:<content hash>``."""
    return DIR_VERSION_PREFIX + version_of(
        content_hash(collect_files(hooks_dir, max_bytes=max_bytes))
    )
