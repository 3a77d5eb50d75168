"""Ed25519 signatures over bundles: the fleet trusts a key, not whoever can write Redis.

Anyone holding Redis write access (a leaked producer password is enough without the shipped
ACL) can store a bundle, recompute every hash in it and move the stamp. The hashes in
:mod:`hookbus.bundles.check` catch corruption, not forgery; only a key that Redis never
holds does. ``hookbus keys generate`` makes a pair: ``signing.key`` stays with whoever may
release hooks (``$HOOKBUS_SIGNING_KEY_FILE``), ``verify.key`` goes to every worker
(``$HOOKBUS_VERIFY_KEY_FILE``). A worker that has a verify key refuses any bundle whose
signature does not verify under it.

What is signed is :func:`signed_message`: a domain tag, the namespace and the bundle's
content hash (which covers every file's path, executable bit and SHA-256). The namespace is
in it so that a bundle signed for one namespace cannot be replayed into another.

Without keys on either side hookbus runs unsigned (so that ``hookbus dev`` needs no set-up),
and says so: :func:`warn_unsigned` logs :func:`trust_warning` once per process (a worker that
hosts hooks in several places, or ``hookbus dev``'s push and its three workers, must not say
it four times). ``hookbus dev`` says it once in its banner instead, and the workers it
starts get :data:`UNSIGNED_SAID_ENV` so that they do not repeat it.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from hookbus.errors import BundleError, ConfigError

log = logging.getLogger(__name__)

#: Variable naming the private key file ``hookbus reload`` signs with.
SIGNING_KEY_ENV = "HOOKBUS_SIGNING_KEY_FILE"
#: Variable naming the public key file workers verify bundles with.
VERIFY_KEY_ENV = "HOOKBUS_VERIFY_KEY_FILE"
#: File names ``hookbus keys generate`` writes.
SIGNING_KEY_FILENAME = "signing.key"
VERIFY_KEY_FILENAME = "verify.key"
#: Mode of the private key file: readable by its owner only.
SIGNING_KEY_MODE = 0o600
#: Hex digits of the key id (SHA-256 of the raw public key) shown in metadata and status.
KEY_ID_HEX_CHARS = 16
#: Set (to ``1``) by ``hookbus dev`` for the workers it starts: its banner already said
#: that they run unsigned. Their start-up line still says ``UNSIGNED``, and so does status.
UNSIGNED_SAID_ENV = "HOOKBUS_UNSIGNED_SAID"
#: The sides (``worker``, ``reload``) whose unsigned-mode warning this process has said.
_said: set[str] = set()
#: Domain tag of the signed message: a signature over a bundle is never valid for anything else.
_DOMAIN = b"hookbus-bundle-signature-v1\0"
#: Domain tag of a message that also covers the release sequence and the history anchor.
_DOMAIN_V2 = b"hookbus-bundle-signature-v2\0"


@dataclass(frozen=True)
class KeyPaths:
    """The two files :func:`generate_keys` wrote."""

    signing: Path
    verify: Path
    key_id: str


def key_id(public: Ed25519PublicKey) -> str:
    """A short, stable name of a key pair (from its public half)."""
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:KEY_ID_HEX_CHARS]


def generate_keys(out_dir: Path, *, overwrite: bool = False) -> KeyPaths:
    """Write a new pair: ``signing.key`` (PKCS#8 PEM, mode 0600) and ``verify.key``.

    Refuses (:class:`ConfigError`) to replace existing files unless ``overwrite``: a lost
    signing key means re-keying every worker."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    signing_path = out / SIGNING_KEY_FILENAME
    verify_path = out / VERIFY_KEY_FILENAME
    for path in (signing_path, verify_path):
        if path.exists() and not overwrite:
            raise ConfigError(
                f"{path} already exists; move it away first (or pass --force to replace the "
                "pair, after which every worker needs the new verify.key)"
            )
    private = Ed25519PrivateKey.generate()
    public = private.public_key()
    private_pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public_pem = public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    _write_new(signing_path, private_pem, SIGNING_KEY_MODE)
    _write_new(verify_path, public_pem, 0o644)
    return KeyPaths(signing=signing_path, verify=verify_path, key_id=key_id(public))


def _write_new(path: Path, data: bytes, mode: int) -> None:
    """Write ``data`` with ``mode`` from the first byte (never briefly world-readable)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _read(path: Path, what: str, variable: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"{variable}={path}: cannot read the {what} ({exc.strerror or exc}); "
            "create a pair with `hookbus keys generate --out DIR`"
        ) from exc


def load_signing_key(path: Path) -> Ed25519PrivateKey:
    """The private key in ``path`` (:class:`ConfigError` when it is not an Ed25519 key, or
    when users other than its owner may read or write it)."""
    data = _read(path, "signing key", SIGNING_KEY_ENV)
    try:
        mode = Path(path).stat().st_mode
    except OSError:
        mode = 0
    if mode & 0o077:  # whoever can read it can sign any bundle: refused, not warned about
        raise ConfigError(
            f"{SIGNING_KEY_ENV}={path}: the signing key is open to other users "
            f"(mode {mode & 0o777:o}); chmod 600 {path}"
        )
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise ConfigError(
            f"{SIGNING_KEY_ENV}={path} is not an unencrypted PEM private key ({exc})"
        ) from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise ConfigError(f"{SIGNING_KEY_ENV}={path} is not an Ed25519 key")
    return key


def load_verify_key(path: Path) -> Ed25519PublicKey:
    """The public key in ``path`` (:class:`ConfigError` when it is not an Ed25519 key)."""
    data = _read(path, "verify key", VERIFY_KEY_ENV)
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{VERIFY_KEY_ENV}={path} is not a PEM public key ({exc})") from exc
    if not isinstance(key, Ed25519PublicKey):
        raise ConfigError(f"{VERIFY_KEY_ENV}={path} is not an Ed25519 key")
    return key


def signing_key_from_env(environ: Mapping[str, str] | None = None) -> Ed25519PrivateKey | None:
    """The key ``$HOOKBUS_SIGNING_KEY_FILE`` names, or None when it is unset or empty."""
    env = os.environ if environ is None else environ
    path = env.get(SIGNING_KEY_ENV, "").strip()
    return load_signing_key(Path(path)) if path else None


def verify_key_from_env(environ: Mapping[str, str] | None = None) -> Ed25519PublicKey | None:
    """The key ``$HOOKBUS_VERIFY_KEY_FILE`` names, or None when it is unset or empty."""
    env = os.environ if environ is None else environ
    path = env.get(VERIFY_KEY_ENV, "").strip()
    return load_verify_key(Path(path)) if path else None


@dataclass(frozen=True)
class Anchor:
    """What a signature covers besides the files: the release sequence (a rollback is one
    with ``rollback`` set), the change history's last entry and length when the bundle
    became current, and the kinds that fail closed."""

    sequence: int
    rollback: bool = False
    history_head: str = ""
    history_len: int = 0
    guarded_kinds: tuple[str, ...] = ()

    def encode(self) -> bytes:
        fields = (
            str(self.sequence),
            "rollback" if self.rollback else "release",
            self.history_head,
            str(self.history_len),
            ",".join(sorted(self.guarded_kinds)),
        )
        return "\0".join(fields).encode()


def signed_message(namespace: str, content_hash: str, anchor: Anchor | None = None) -> bytes:
    """The bytes a bundle signature covers (a bundle from before sequences: no anchor)."""
    if anchor is None:
        return _DOMAIN + namespace.encode() + b"\0" + content_hash.encode()
    return _DOMAIN_V2 + namespace.encode() + b"\0" + content_hash.encode() + b"\0" + anchor.encode()


def sign(
    key: Ed25519PrivateKey, namespace: str, content_hash: str, anchor: Anchor | None = None
) -> str:
    """The signature of a bundle, base64 (what :class:`BundleMeta.signature` holds)."""
    return base64.b64encode(key.sign(signed_message(namespace, content_hash, anchor))).decode()


def check_signature(
    key: Ed25519PublicKey | None,
    namespace: str,
    content_hash: str,
    signature: str,
    *,
    version: str,
    anchor: Anchor | None = None,
) -> bool:
    """Verify a bundle's signature; True when it was verified, False when there is no key.

    With a key, a missing, malformed or wrong signature raises :class:`BundleError`: the
    worker keeps its current set. Without one nothing can be checked (unsigned mode)."""
    if key is None:
        return False
    if not signature:
        raise BundleError(
            f"bundle {version} is not signed and this worker requires signatures "
            f"({VERIFY_KEY_ENV} is set); push it with `hookbus reload` and {SIGNING_KEY_ENV}"
        )
    try:
        raw = base64.b64decode(signature, validate=True)
        key.verify(raw, signed_message(namespace, content_hash, anchor))
    except (InvalidSignature, ValueError) as exc:
        raise BundleError(
            f"bundle {version}: signature does not verify with this worker's key "
            f"{key_id(key)} (forged, or signed with another key)"
        ) from exc
    return True


def trust_warning(side: str) -> str:
    """The loud line said when ``side`` ("reload" or "worker") runs without keys."""
    if side == "worker":
        return (
            f"UNSIGNED MODE: {VERIFY_KEY_ENV} is not set, so this worker runs any bundle "
            "written to Redis, including one forged by anyone with write access; create keys "
            "with `hookbus keys generate --out DIR` and set it to DIR/verify.key"
        )
    return (
        f"UNSIGNED MODE: {SIGNING_KEY_ENV} is not set, so this bundle is pushed unsigned and "
        "workers cannot tell it from a forgery; create keys with `hookbus keys generate "
        "--out DIR` and set it to DIR/signing.key"
    )


def warn_unsigned(side: str) -> None:
    """Log :func:`trust_warning` for ``side`` once per process, and not at all where
    :data:`UNSIGNED_SAID_ENV` says it was said already (then at DEBUG only)."""
    if side in _said:
        return
    _said.add(side)
    if os.environ.get(UNSIGNED_SAID_ENV) == "1":
        log.debug("%s", trust_warning(side))
        return
    log.warning("%s", trust_warning(side))


def unsigned_said() -> None:
    """Mark both sides' warnings as said in this process (``hookbus dev``, whose banner
    says once that it runs unsigned)."""
    _said.update(("worker", "reload"))
