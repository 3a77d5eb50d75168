"""The last bundle a verifying worker verified, kept in its private cache.

Two things need it after a restart, when memory is gone:

* **order**: a verifying worker refuses a bundle whose signed sequence is below the last one
  it verified (an older bundle made current again by whoever holds a Redis user but not the
  signing key); the last verified bundle's sequence is that floor;
* **service**: a worker restarted while the stamp names a bundle it refuses (forged, older,
  unsigned) serves the last bundle it verified instead of running no hooks at all.

The file (``last-verified.bundle`` in the cache folder, mode 0600, written atomically) holds
the bundle's metadata and files as fetched; it is checked again like a fetched bundle (hashes
and signature) before it is served, so the cache folder's privacy is not all that guards it.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import msgspec

from hookbus.bundles.cache import prepare_root
from hookbus.bundles.check import verify
from hookbus.bundles.model import Bundle, BundleFile, BundleMeta
from hookbus.errors import BundleError

#: Name of the file, in the worker's cache folder.
FILENAME = "last-verified.bundle"


class _Stored(msgspec.Struct, frozen=True):
    meta: BundleMeta
    files: list[BundleFile]


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(_Stored)


def save(bundle: Bundle, cache_root: Path) -> None:
    """Keep ``bundle`` (just verified) as the last verified one."""
    root = prepare_root(cache_root)
    path = root / FILENAME
    tmp = root / f".{FILENAME}.{os.getpid()}"
    data = _encoder.encode(_Stored(meta=bundle.meta, files=list(bundle.files)))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def load(cache_root: Path) -> Bundle | None:
    """The last verified bundle, its hashes checked again; None when there is none.
    :class:`BundleError` when the file is unreadable or its files do not match."""
    path = Path(cache_root) / FILENAME
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BundleError(f"{path}: cannot read the last verified bundle ({exc})") from exc
    try:
        stored = _decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise BundleError(f"{path}: unreadable ({exc}); it is rewritten at the next load") from exc
    bundle = Bundle(meta=stored.meta, files=stored.files)
    verify(bundle, expected_version=stored.meta.version)
    return bundle


def floor(cache_root: Path) -> int:
    """The sequence of the last verified bundle (0: none, or unreadable)."""
    try:
        found = load(cache_root)
    except BundleError:
        return 0
    return found.meta.sequence if found is not None else 0
