"""What a verifying worker checks before it runs a bundle, besides the files' hashes: the
signature (over the files, the release sequence and the history anchor) and the order of
releases, kept across restarts by the last bundle it verified
(:mod:`hookbus.bundles.verified`).

A bundle whose sequence is below the last one this worker verified is refused: whoever holds
a Redis user that can move the stamp (but not the signing key) cannot make an older bundle
current again. ``hookbus reload --rollback`` signs the older files anew with a higher
sequence, marked as a rollback, and is taken.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from hookbus.audit.folder import audit_folder
from hookbus.bundles import signing, verified
from hookbus.bundles.store import anchor_of
from hookbus.errors import BundleError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from hookbus.bundles.model import Bundle
    from hookbus.bus.settings.loader import Settings

log = logging.getLogger(__name__)


def check(bundle: Bundle, key: Ed25519PublicKey | None, namespace: str, *, floor: int) -> None:
    """Refuse (:class:`BundleError`) a bundle whose signature does not verify under ``key``
    or whose sequence is below ``floor``; nothing is checked without a key (unsigned mode)."""
    meta = bundle.meta
    if key is None:
        return
    signing.check_signature(
        key,
        namespace,
        meta.content_hash,
        meta.signature,
        version=meta.version,
        anchor=anchor_of(meta),
    )
    if meta.sequence < floor:
        raise BundleError(
            f"bundle {meta.version} is older (release {meta.sequence}) than a bundle this "
            f"worker already verified (release {floor}); making an older bundle current "
            "again takes `hookbus reload --rollback` with the signing key"
        )


def remember(bundle: Bundle, cache_root: Path, key: Ed25519PublicKey | None) -> None:
    """Keep ``bundle``, just verified and swapped in, as the last verified one."""
    if key is None:
        return
    try:
        verified.save(bundle, cache_root)
    except (OSError, BundleError) as exc:  # serving matters more; said once per load
        log.warning("last verified bundle not kept in %s: %s", cache_root, exc)


def floor(cache_root: Path, key: Ed25519PublicKey | None) -> int:
    """The release sequence below which this worker refuses bundles (0 without a key)."""
    return verified.floor(cache_root) if key is not None else 0


def last_verified(cache_root: Path, key: Ed25519PublicKey | None, namespace: str) -> Bundle | None:
    """The last bundle this worker verified, checked again (hashes and signature); None
    without a key, without one kept, or when it no longer verifies."""
    if key is None:
        return None
    try:
        bundle = verified.load(cache_root)
        if bundle is not None:
            check(bundle, key, namespace, floor=0)
    except BundleError as exc:
        log.warning("the last verified bundle in %s cannot be served: %s", cache_root, exc)
        return None
    return bundle


def audit_before_load(folder: Path, version: str, settings: Settings) -> None:
    """Run the audit here, on the files about to be loaded: a verdict stored beside the
    bundle is whatever its writer put there. Critical findings refuse the bundle
    (:class:`BundleError`), but for those about a hook its build refuses anyway: that hook
    is left out alone."""
    report = audit_folder(folder, settings=settings)
    critical = report.refusing_a_set
    if critical:
        lines = "; ".join(f"{f.rule} {f.file}:{f.line or ''} {f.message}" for f in critical)
        raise BundleError(
            f"the worker's audit found {len(critical)} critical problem(s) in bundle "
            f"{version}: {lines}"
        )
