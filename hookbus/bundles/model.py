"""Hook bundles as values: what a bundle holds (its files, metadata and audit summary).

``hookbus reload`` turns a hooks folder into a *bundle*: every manifest and handler file,
with its executable bit and SHA-256, read from disk once into memory. Everything after that
(validation, the audit, storage in Redis, every worker's cache) works on those bytes, never
on the folder again, so that what was checked is what runs. This module only says what a
bundle is; packing a folder is :mod:`hookbus.bundles.pack`, the hashes and the checks a
fetched bundle must pass are :mod:`hookbus.bundles.check`, storage is
:mod:`hookbus.bundles.store` and the workers' file cache :mod:`hookbus.bundles.cache`.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

#: Hex digits of the content hash used as the bundle version.
VERSION_HEX_CHARS = 12
#: Prefix of the version of a hook set loaded straight from a folder (no bundle).
DIR_VERSION_PREFIX = "dir:"
#: Format of the stored bundle; bumped only with a reader that understands both.
BUNDLE_FORMAT = 1
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
    #: Ed25519 signature (base64) of :func:`hookbus.bundles.signing.signed_message`; "" unsigned.
    signature: str = ""
    #: Which key signed it (:func:`hookbus.bundles.signing.key_id`); "" unsigned.
    key_id: str = ""
    #: Kinds with an enabled guard (``on_error = "deny"`` or ``guard = true``, enforced):
    #: they fail closed when the fleet cannot answer (published as the failure policy).
    guarded_kinds: list[str] = msgspec.field(default_factory=list)
    #: Release order, signed: a verifying worker refuses a bundle older than one it ran. A
    #: rollback re-signs the older files with a new sequence (``rollback`` true). 0: a
    #: bundle from before sequences (signed without them).
    sequence: int = 0
    rollback: bool = False
    #: The change history's last entry when this became current (its hash, and how many
    #: entries the history had), signed: a history cut back from its end is reported.
    history_head: str = ""
    history_len: int = 0

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
