"""Bundles in Redis: store already-checked bytes, point the stamp at them, roll back.

The bus only stores and serves bundles; deciding whether a folder may become one
(validation, the audit, signing) happens above it, in :mod:`hookbus.authoring.release`.

Storage, all under the namespace's hash tag: ``bundle:<version>`` is a hash with ``meta``
(JSON, small, read by ``reload --list``) and ``files`` (msgpack list of files); ``bundles``
is a sorted set of versions scored by the time each became current (history and rollback);
``bundle`` is the stamp, and every change of it is announced on the reload channel.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from hookbus.bundles.check import content_hash, seal, verify, version_of
from hookbus.bundles.model import AuditSummary, Bundle, BundleFile, BundleMeta
from hookbus.bundles.signing import Anchor, key_id, sign
from hookbus.bundles.stamp import write_stamp_file
from hookbus.bus.connection import client_url, idempotent, translated
from hookbus.bus.keys import Keys, fail_policy
from hookbus.bus.policy import guarded
from hookbus.bus.wire import now_ms
from hookbus.errors import BundleError

if TYPE_CHECKING:
    import redis
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from hookbus.bus.settings.loader import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PushResult:
    """What :func:`store_and_announce` / :func:`rollback` did. ``changed`` is false when the
    folder's content was already current (nothing was stored or announced)."""

    version: str
    changed: bool
    problems: list[str] = field(default_factory=list)
    previous: str | None = None
    hooks: list[str] = field(default_factory=list)
    audit: AuditSummary = field(default_factory=AuditSummary)
    pruned: list[str] = field(default_factory=list)
    #: Hooks the release left out (``--allow-partial``), by folder or file name.
    left_out: list[str] = field(default_factory=list)
    #: Id of the key that signed the bundle; "" when it was pushed unsigned.
    signed_by: str = ""
    #: Agent-written hooks waiting for an operator's approval, left out of the bundle.
    pending: list[str] = field(default_factory=list)
    #: What loads but will misbehave (a blocking hook slower than its kind's deadline), as
    #: ``"<hook>: <path>: <field>: <why>"``.
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class HistoryEntry:
    """One line of ``hookbus reload --list``."""

    version: str
    current_since_ms: int
    current: bool
    meta: BundleMeta | None


_meta_decoder = msgspec.json.Decoder(BundleMeta)
_files_decoder = msgspec.msgpack.Decoder(list[BundleFile])
_json_encoder = msgspec.json.Encoder()
_msgpack_encoder = msgspec.msgpack.Encoder()


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def current_version(client: redis.Redis, keys: Keys) -> str | None:
    """The version the stamp names, or None when no bundle was ever pushed."""
    return _text(idempotent(client, lambda: client.get(keys.bundle_stamp)))


def store_and_announce(
    client: redis.Redis,
    settings: Settings,
    files: Sequence[BundleFile],
    *,
    who: str,
    source: Path,
    hooks: list[str],
    problems: list[str],
    audit: AuditSummary,
    signing_key: Ed25519PrivateKey | None = None,
    guarded_kinds: Sequence[str] = (),
    record: Callable[[str], tuple[str, int]] | None = None,
) -> PushResult:
    """Store ``files`` (already validated and audited by the caller) as the current bundle,
    signed with ``signing_key`` when one is given. ``guarded_kinds`` is published as the
    failure policy (:mod:`hookbus.bus.policy.guarded`). ``record(version)``, called once the
    push is certain and before anything is signed, appends the change to the history and
    returns its anchor (last entry's hash, entry count), which the signature covers.

    Returns ``changed=False`` without writing anything when the same content is current and
    already carries this key's signature. The same content pushed again with a key (it was
    pushed unsigned, or with another key) gets its metadata re-signed and is announced again.
    """
    files = list(files)
    digest = content_hash(files)
    version = version_of(digest)
    keys = Keys.for_namespace(settings.namespace)
    kid = key_id(signing_key.public_key()) if signing_key else ""
    previous = current_version(client, keys)
    stored = fetch_meta(client, keys, version)
    kinds = sorted(set(guarded_kinds))
    resign = stored is not None and (
        (signing_key is not None and stored.key_id != kid)  # pushed unsigned or with another
        or stored.guarded_kinds != kinds  # another catalogue or policy
    )
    if previous == version and not resign:
        log.info("bundle %s is already current; nothing to do", version)
        return PushResult(
            version=version,
            changed=False,
            problems=problems,
            previous=previous,
            hooks=hooks,
            audit=audit,
        )
    sequence = next_sequence(client, keys)
    head, length = record(version) if record is not None else ("", 0)
    anchor = Anchor(sequence, False, head, length, tuple(kinds))
    signature = sign(signing_key, settings.namespace, digest, anchor) if signing_key else ""
    meta = BundleMeta(
        version=version,
        content_hash=digest,
        created_ms=now_ms(),
        who=who,
        source=str(source),
        hooks=hooks,
        problems=problems,
        audit=audit,
        size_bytes=sum(len(f.data) for f in files),
        file_count=len(files),
        seal=seal(digest, audit),
        signature=signature,
        key_id=kid,
        guarded_kinds=kinds,
        sequence=sequence,
        history_head=head,
        history_len=length,
    )
    bundle_key = keys.bundle(version)
    with translated(client_url(client)):
        pipe = client.pipeline(transaction=True)
        # each release has metadata of its own (its sequence and anchor); HSETNX keeps the
        # files immutable: same version means same files
        pipe.hset(bundle_key, "meta", _json_encoder.encode(meta))
        pipe.hsetnx(bundle_key, "files", _msgpack_encoder.encode(files))
        pipe.execute()
    pruned = make_current(client, settings, keys, version)
    log.info(
        "pushed bundle %s (%d hooks, %d problems, %s)",
        version,
        len(hooks),
        len(problems),
        f"signed by key {kid}" if kid else "UNSIGNED",
    )
    return PushResult(
        version=version,
        changed=True,
        problems=problems,
        previous=previous,
        hooks=hooks,
        audit=audit,
        pruned=pruned,
    )


def make_current(client: redis.Redis, settings: Settings, keys: Keys, version: str) -> list[str]:
    """Point the stamp at ``version`` and publish its failure policy (one transaction),
    record it in the history, announce it, prune."""
    now = now_ms()
    meta = fetch_meta(client, keys, version)
    kinds = meta.guarded_kinds if meta is not None else []
    with translated(client_url(client)):
        pipe = client.pipeline(transaction=True)
        pipe.set(keys.bundle_stamp, version)
        pipe.set(fail_policy(keys.ns), guarded.encode(version, kinds))
        pipe.zadd(keys.bundle_history, {version: now})
        pipe.publish(keys.reload_channel, version)
        pipe.execute()
    try:
        write_stamp_file(settings, version)
    except OSError as exc:  # the fleet already follows Redis; the file is a convenience
        log.warning("stamp file not written in %s: %s", settings.reload.data_dir, exc)
    return prune(client, keys, keep=settings.reload.bundle_history, current=version)


def prune(client: redis.Redis, keys: Keys, *, keep: int, current: str | None) -> list[str]:
    """Delete bundles beyond the ``keep`` most recently current ones (never the current)."""
    keep = max(1, keep)
    with translated(client_url(client)):
        old = [_text(v) or "" for v in client.zrange(keys.bundle_history, 0, -(keep + 1))]
        old = [v for v in old if v and v != current]
        if old:
            pipe = client.pipeline(transaction=True)
            pipe.zrem(keys.bundle_history, *old)
            pipe.delete(*(keys.bundle(v) for v in old))
            pipe.execute()
    return old


def next_sequence(client: redis.Redis, keys: Keys) -> int:
    """The sequence of the next release: past the current bundle's, and at least the time
    in ms (so it keeps rising across a wiped namespace)."""
    current = current_version(client, keys)
    meta = fetch_meta(client, keys, current) if current else None
    return max(now_ms(), (meta.sequence if meta is not None else 0) + 1)


def anchor_of(meta: BundleMeta) -> Anchor | None:
    """What the signature of ``meta`` covers besides the files (None: a bundle from before
    sequences)."""
    if meta.sequence == 0:
        return None
    return Anchor(
        meta.sequence, meta.rollback, meta.history_head, meta.history_len, tuple(meta.guarded_kinds)
    )


def resigned(
    client: redis.Redis,
    settings: Settings,
    meta: BundleMeta,
    *,
    signing_key: Ed25519PrivateKey | None,
    anchor: tuple[str, int],
) -> BundleMeta:
    """``meta`` made a rollback: a new sequence and history anchor, signed (when a key is
    given) as a rollback, stored over the old metadata."""
    keys = Keys.for_namespace(settings.namespace)
    head, length = anchor
    signed = Anchor(next_sequence(client, keys), True, head, length, tuple(meta.guarded_kinds))
    signature = (
        sign(signing_key, settings.namespace, meta.content_hash, signed) if signing_key else ""
    )
    new = msgspec.structs.replace(
        meta,
        sequence=signed.sequence,
        rollback=True,
        history_head=head,
        history_len=length,
        signature=signature,
        key_id=key_id(signing_key.public_key()) if signing_key else "",
    )
    with translated(client_url(client)):
        client.hset(keys.bundle(meta.version), "meta", _json_encoder.encode(new))
    return new


def rollback(
    client: redis.Redis,
    settings: Settings,
    version: str | None = None,
    *,
    resign: Callable[[BundleMeta], BundleMeta] | None = None,
) -> PushResult:
    """Make an earlier bundle current again (default: the one current before this one).
    ``resign`` gives it its new metadata (sequence, anchor, signature) before it is made
    current."""
    keys = Keys.for_namespace(settings.namespace)
    current = current_version(client, keys)
    if version is None:
        with translated(client_url(client)):
            recent = [_text(v) or "" for v in client.zrevrange(keys.bundle_history, 0, -1)]
        earlier = [v for v in recent if v != current]
        if not earlier:
            raise BundleError("no earlier bundle to roll back to (see `hookbus reload --list`)")
        version = earlier[0]
    meta = fetch_meta(client, keys, version)
    if meta is None:
        raise BundleError(
            f"bundle {version} is not stored (pruned or never pushed); "
            "see `hookbus reload --list` for the versions you can roll back to"
        )
    if version == current:
        return PushResult(
            version=version,
            changed=False,
            previous=current,
            hooks=meta.hooks,
            problems=meta.problems,
            audit=meta.audit,
        )
    if resign is not None:
        meta = resign(meta)
    pruned = make_current(client, settings, keys, version)
    return PushResult(
        version=version,
        changed=True,
        previous=current,
        hooks=meta.hooks,
        problems=meta.problems,
        audit=meta.audit,
        pruned=pruned,
    )


def fetch_meta(client: redis.Redis, keys: Keys, version: str) -> BundleMeta | None:
    """The metadata of a stored bundle, or None when it is not stored."""
    raw = idempotent(client, lambda: client.hget(keys.bundle(version), "meta"))
    if raw is None:
        return None
    try:
        return _meta_decoder.decode(raw)
    except msgspec.DecodeError as exc:
        raise BundleError(f"bundle {version}: unreadable metadata ({exc}); push again") from exc


def history(client: redis.Redis, keys: Keys, *, limit: int = 50) -> list[HistoryEntry]:
    """Recent bundles, newest first, for ``hookbus reload --list``."""
    current = current_version(client, keys)
    rows: list[tuple[bytes, float]] = idempotent(
        client,
        lambda: client.zrevrange(keys.bundle_history, 0, limit - 1, withscores=True),  # type: ignore[arg-type,return-value]
    )
    entries = []
    for member, score in rows:
        version = _text(member) or ""
        entries.append(
            HistoryEntry(
                version=version,
                current_since_ms=int(score),
                current=version == current,
                meta=fetch_meta(client, keys, version),
            )
        )
    return entries


def fetch_bundle(client: redis.Redis, keys: Keys, version: str) -> Bundle:
    """Fetch and verify a bundle; :class:`BundleError` when it is missing or tampered."""
    raw: list[bytes | None] = idempotent(
        client,
        lambda: client.hmget(keys.bundle(version), ["meta", "files"]),  # type: ignore[arg-type,return-value]
    )
    raw_meta, raw_files = raw
    if raw_meta is None or raw_files is None:
        raise BundleError(f"bundle {version} is not stored in Redis (pruned or never pushed)")
    try:
        meta = _meta_decoder.decode(raw_meta)
        files = _files_decoder.decode(raw_files)
    except msgspec.DecodeError as exc:
        raise BundleError(f"bundle {version} is unreadable: {exc}") from exc
    bundle = Bundle(meta=meta, files=files)
    verify(bundle, expected_version=version)
    return bundle
