"""How a bundle is checked: its content hash and version, its seal, and :func:`verify`.

The version is derived from the content: pushing the same folder twice is a no-op that says
so, two hosts that push the same content agree on the version, and a worker recomputes the
version from the files it received and refuses an entry that does not match. Those hashes
guard against corruption and careless edits of a stored entry; against someone who can
write Redis keys at will only a signature helps (:mod:`hookbus.bundles.signing`), and the
audit summary stored here is informative only: workers run the audit again on what they load.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import PurePosixPath

import msgspec

from hookbus.bundles.model import (
    BUNDLE_FORMAT,
    EXEC_MODE,
    PLAIN_MODE,
    VERSION_HEX_CHARS,
    AuditSummary,
    Bundle,
    BundleFile,
)
from hookbus.errors import BundleError

_json_encoder = msgspec.json.Encoder()


def content_hash(files: Iterable[BundleFile]) -> str:
    """SHA-256 over every file's path, executable bit and content hash, in path order."""
    digest = hashlib.sha256()
    for f in sorted(files, key=lambda f: f.path):
        digest.update(f"{f.path}\0{f.mode:o}\0{f.sha256}\n".encode())
    return digest.hexdigest()


def version_of(hash_hex: str) -> str:
    """The bundle version of a content hash."""
    return hash_hex[:VERSION_HEX_CHARS]


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
