"""Hook bundles as values: what a bundle holds, how a folder is packed, how one is checked.

``hookbus reload`` turns a hooks folder into a *bundle*: every manifest and handler file,
with its executable bit and SHA-256, read from disk once into memory. Everything after that
(validation, the audit, storage in Redis, every worker's cache) works on those bytes, never
on the folder again, so that what was checked is what runs.

The version is derived from the content: pushing the same folder twice is a no-op that says
so, two hosts that push the same content agree on the version, and a worker recomputes the
version from the files it received and refuses an entry that does not match. Those hashes
guard against corruption and careless edits of a stored entry; against someone who can
write Redis keys at will only a signature helps (:mod:`hookbus.bus.signing`), and the
audit summary stored here is informative only: workers run the audit again on what they load.

Storage lives in :mod:`hookbus.bus.bundle_store`, the workers' file cache in
:mod:`hookbus.bus.bundle_cache`.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import msgspec

from hookbus.bus.stamp import STAMP_FILENAME
from hookbus.errors import BundleError

#: Hex digits of the content hash used as the bundle version.
VERSION_HEX_CHARS = 12
#: Prefix of the version of a hook set loaded straight from a folder (no bundle).
DIR_VERSION_PREFIX = "dir:"
#: Format of the stored bundle; bumped only with a reader that understands both.
BUNDLE_FORMAT = 1
#: Folders never packed into a bundle (caches and version control, not hooks).
SKIP_DIR_NAMES = frozenset(
    {"__pycache__", ".git", ".hg", ".svn", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
)
#: File names / suffixes never packed (byte code and desktop litter).
SKIP_FILE_SUFFIXES = (".pyc", ".pyo", ".swp", "~")
SKIP_FILE_NAMES = frozenset({".DS_Store", STAMP_FILENAME})
#: Mode given to executable files (any x bit set on the source) and to the rest.
EXEC_MODE = 0o755
PLAIN_MODE = 0o644


class BundleFile(msgspec.Struct, frozen=True, kw_only=True):
    """One file of a bundle: a POSIX path relative to the hooks folder, its mode (0o755 or
    0o644: only the executable bit is kept), its SHA-256 and its bytes."""

    path: str
    mode: int
    sha256: str
    data: bytes


class AuditSummary(msgspec.Struct, frozen=True, kw_only=True):
    """What the security audit said at push time. ``ran`` is false when the audit module
    is not installed (validation alone gated the bundle)."""

    ran: bool = False
    skipped: bool = False
    critical: int = 0
    findings: list[str] = msgspec.field(default_factory=list)


class BundleMeta(msgspec.Struct, frozen=True, kw_only=True):
    """The small part of a bundle: who pushed what, when, and the hashes to verify it."""

    version: str
    content_hash: str
    created_ms: int
    who: str | None = None
    source: str | None = None
    hooks: list[str] = msgspec.field(default_factory=list)
    problems: list[str] = msgspec.field(default_factory=list)
    audit: AuditSummary = msgspec.field(default_factory=AuditSummary)
    size_bytes: int = 0
    file_count: int = 0
    seal: str = ""
    format: int = BUNDLE_FORMAT
    #: Ed25519 signature (base64) of :func:`hookbus.bus.signing.signed_message`; "" unsigned.
    signature: str = ""
    #: Which key signed it (:func:`hookbus.bus.signing.key_id`); "" unsigned.
    key_id: str = ""

    @property
    def hook_count(self) -> int:
        return len(self.hooks)


@dataclass(frozen=True)
class Bundle:
    """A fetched and verified bundle."""

    meta: BundleMeta
    files: list[BundleFile]

    @property
    def version(self) -> str:
        return self.meta.version


_json_encoder = msgspec.json.Encoder()


def _is_skipped_file(name: str) -> bool:
    return name in SKIP_FILE_NAMES or name.endswith(SKIP_FILE_SUFFIXES)


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
            if name in SKIP_DIR_NAMES:
                continue
            if (here / name).is_symlink():
                refused.append(f"{(here / name).relative_to(root).as_posix()}: symlink")
                continue
            kept_dirs.append(name)
        dirnames[:] = kept_dirs
        for name in sorted(filenames):
            if _is_skipped_file(name):
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


def content_hash(files: Iterable[BundleFile]) -> str:
    """SHA-256 over every file's path, executable bit and content hash, in path order."""
    digest = hashlib.sha256()
    for f in sorted(files, key=lambda f: f.path):
        digest.update(f"{f.path}\0{f.mode:o}\0{f.sha256}\n".encode())
    return digest.hexdigest()


def version_of(hash_hex: str) -> str:
    """The bundle version of a content hash."""
    return hash_hex[:VERSION_HEX_CHARS]


def dir_version(hooks_dir: Path, *, max_bytes: int) -> str:
    """The version of a hook set loaded straight from a folder: ``dir:<content hash>``."""
    return DIR_VERSION_PREFIX + version_of(
        content_hash(collect_files(hooks_dir, max_bytes=max_bytes))
    )


def seal(content: str, audit: AuditSummary) -> str:
    """Hash binding the content hash to the audit summary: a stored entry whose audit
    summary was edited no longer matches its seal (unkeyed: it catches corruption, not
    forgery)."""
    return hashlib.sha256(content.encode() + b"\0" + _json_encoder.encode(audit)).hexdigest()


def check_relative(path: str) -> PurePosixPath:
    """Refuse absolute paths, ``..`` and backslashes: nothing may land outside the cache."""
    pure = PurePosixPath(path)
    if (
        not path
        or pure.is_absolute()
        or "\\" in path
        or "\0" in path
        or any(part in ("..", "") for part in path.split("/"))
    ):
        raise BundleError(f"bundle entry {path!r} escapes the hooks folder; refused")
    return pure


def verify(bundle: Bundle, *, expected_version: str) -> None:
    """Refuse a bundle whose files, hashes, version, seal or audit do not agree."""
    meta = bundle.meta
    if meta.format != BUNDLE_FORMAT:
        raise BundleError(f"bundle {expected_version} has format {meta.format}; upgrade hookbus")
    for f in bundle.files:
        check_relative(f.path)
        if hashlib.sha256(f.data).hexdigest() != f.sha256:
            raise BundleError(f"bundle {expected_version}: {f.path} does not match its hash")
        if f.mode not in (EXEC_MODE, PLAIN_MODE):
            raise BundleError(f"bundle {expected_version}: {f.path} has mode {f.mode:o}")
    digest = content_hash(bundle.files)
    if digest != meta.content_hash or version_of(digest) != meta.version:
        raise BundleError(f"bundle {expected_version}: content does not match its version")
    if meta.version != expected_version:
        raise BundleError(f"bundle stored as {expected_version} says it is {meta.version}")
    if meta.seal != seal(digest, meta.audit):
        raise BundleError(f"bundle {expected_version}: audit summary does not match its seal")
    if meta.audit.critical:
        raise BundleError(
            f"bundle {expected_version} carries {meta.audit.critical} critical audit finding(s)"
        )
