"""Hook bundles: immutable, content-addressed snapshots of a hooks folder, and the stamp.

``hookbus reload`` turns a hooks folder into a *bundle* (every manifest and handler file,
with its executable bit and SHA-256), stores it under a version derived from its content,
points the stamp (``hookbus:{ns}:bundle``) at that version and announces it on the reload
channel. Workers fetch the bundle the stamp names, verify it, write its files into a local
cache keyed by version and swap their hook set (:mod:`hookbus.workers.hookset`).

Why content-addressed: pushing the same folder twice is a no-op that says so, two hosts
that push the same content agree on the version, and a worker can recompute the version
from the files it received and refuse an entry that does not match. The hashes and the
audit summary travel in the bundle for that check. They guard against corruption and
careless edits of the stored entry, not against someone who can write Redis keys at will:
such a writer can recompute every hash (protect Redis with ACLs, see docs/reload.md).

Storage, all under the namespace's hash tag:
``bundle:<version>`` is a hash with ``meta`` (JSON, small, read by ``reload --list``) and
``files`` (msgpack list of files); ``bundles`` is a sorted set of versions scored by the
time each became current (history and rollback); ``bundle`` is the stamp.
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import importlib
import json
import logging
import os
import shutil
import socket
import stat
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import msgspec

from hookbus.bus.connection import client_url, idempotent, translated
from hookbus.bus.keys import Keys
from hookbus.bus.wire import now_ms
from hookbus.errors import BundleError, SecurityViolation

if TYPE_CHECKING:
    import redis

    from hookbus.bus.settings import Settings

log = logging.getLogger(__name__)

#: Name of the single-host stamp file (seed 000), written in ``reload.data_dir``.
STAMP_FILENAME = "hooks_reload.stamp"
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


@dataclass(frozen=True)
class PushResult:
    """What :func:`push_bundle` / :func:`rollback` did. ``changed`` is false when the
    folder's content was already current (nothing was stored or announced)."""

    version: str
    changed: bool
    problems: list[str] = field(default_factory=list)
    previous: str | None = None
    hooks: list[str] = field(default_factory=list)
    audit: AuditSummary = field(default_factory=AuditSummary)
    pruned: list[str] = field(default_factory=list)


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


# --- packing ----------------------------------------------------------------------------


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


def _seal(content: str, audit: AuditSummary) -> str:
    """Hash binding the content hash to the audit summary: a stored entry whose audit
    summary was edited no longer matches its seal."""
    return hashlib.sha256(content.encode() + b"\0" + _json_encoder.encode(audit)).hexdigest()


# --- validation and audit ---------------------------------------------------------------


def _validate(hooks_dir: Path, settings: Settings) -> tuple[list[str], list[str]]:
    """(names of hooks that load, problems) as the loader sees the folder."""
    from hookbus.hooks.loader import load_hooks

    report = load_hooks(hooks_dir, catalogue=settings.catalogue())
    names = [m.name for m in report.enabled]
    return names, [str(p) for p in report.problems]


def _audit(hooks_dir: Path, settings: Settings) -> AuditSummary:
    """Run the security audit when it is installed; critical findings refuse the bundle."""
    try:
        module = importlib.import_module("hookbus.audit.folder")
    except ModuleNotFoundError as exc:
        if exc.name != "hookbus.audit.folder":
            raise
        return AuditSummary(ran=False)
    audit_folder: Any = getattr(module, "audit_folder", None)
    if audit_folder is None:
        return AuditSummary(ran=False)
    report: Any = audit_folder(hooks_dir, settings=settings)
    findings = list(getattr(report, "findings", []))
    critical = list(getattr(report, "critical", []) or [])
    lines = [_finding_line(f) for f in findings]
    return AuditSummary(
        ran=True,
        skipped=bool(settings.security.skip_security_audit),
        critical=len(critical),
        findings=lines,
    )


def _finding_line(finding: Any) -> str:
    severity = getattr(finding, "severity", "?")
    rule = getattr(finding, "rule", "?")
    where = getattr(finding, "file", None) or ""
    line = getattr(finding, "line", None)
    if line:
        where = f"{where}:{line}"
    message = getattr(finding, "message", str(finding))
    return f"{severity} {rule} {where}: {message}".replace("  ", " ")


# --- Redis side -------------------------------------------------------------------------


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def current_version(client: redis.Redis, keys: Keys) -> str | None:
    """The version the stamp names, or None when no bundle was ever pushed."""
    return _text(idempotent(client, lambda: client.get(keys.bundle_stamp)))


def _default_who() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def push_bundle(
    client: redis.Redis,
    settings: Settings,
    hooks_dir: Path,
    *,
    who: str | None = None,
    strict: bool = False,
) -> PushResult:
    """Validate, audit, store and announce the hooks folder as the current bundle.

    Raises :class:`SecurityViolation` when the audit has critical findings and
    :class:`BundleError` when the folder cannot be packed (symlinks, size) or, with
    ``strict``, when any hook has a validation problem; in both cases nothing is stored
    and the fleet keeps its current set. Without ``strict`` an invalid manifest is a
    warning (returned in ``problems``): the others load, as on every worker.
    """
    hooks_dir = Path(hooks_dir)
    files = collect_files(hooks_dir, max_bytes=settings.reload.max_bundle_bytes)
    names, problems = _validate(hooks_dir, settings)
    if strict and problems:
        raise BundleError(
            f"{len(problems)} problem(s) in {hooks_dir}, nothing published: " + "; ".join(problems)
        )
    audit = _audit(hooks_dir, settings)
    if audit.critical:
        raise SecurityViolation(
            f"the audit found {audit.critical} critical problem(s) in {hooks_dir}; "
            "nothing was published and the fleet keeps its current hooks: "
            + "; ".join(f for f in audit.findings if f.startswith("critical")),
            audit.findings,
        )
    digest = content_hash(files)
    version = version_of(digest)
    keys = Keys.for_namespace(settings.namespace)
    previous = current_version(client, keys)
    if previous == version:
        log.info("bundle %s is already current; nothing to do", version)
        return PushResult(
            version=version,
            changed=False,
            problems=problems,
            previous=previous,
            hooks=names,
            audit=audit,
        )
    meta = BundleMeta(
        version=version,
        content_hash=digest,
        created_ms=now_ms(),
        who=who or _default_who(),
        source=str(hooks_dir.resolve()),
        hooks=names,
        problems=problems,
        audit=audit,
        size_bytes=sum(len(f.data) for f in files),
        file_count=len(files),
        seal=_seal(digest, audit),
    )
    bundle_key = keys.bundle(version)
    with translated(client_url(client)):
        # HSETNX keeps a stored bundle immutable: same version means same files.
        pipe = client.pipeline(transaction=True)
        pipe.hsetnx(bundle_key, "meta", _json_encoder.encode(meta))
        pipe.hsetnx(bundle_key, "files", _msgpack_encoder.encode(files))
        pipe.execute()
    pruned = _make_current(client, settings, keys, version)
    log.info("pushed bundle %s (%d hooks, %d problems)", version, len(names), len(problems))
    return PushResult(
        version=version,
        changed=True,
        problems=problems,
        previous=previous,
        hooks=names,
        audit=audit,
        pruned=pruned,
    )


def _make_current(client: redis.Redis, settings: Settings, keys: Keys, version: str) -> list[str]:
    """Point the stamp at ``version``, record it in the history, announce it, prune."""
    now = now_ms()
    with translated(client_url(client)):
        pipe = client.pipeline(transaction=True)
        pipe.set(keys.bundle_stamp, version)
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


def rollback(client: redis.Redis, settings: Settings, version: str | None = None) -> PushResult:
    """Make an earlier bundle current again (default: the one current before this one)."""
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
    pruned = _make_current(client, settings, keys, version)
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


def verify(bundle: Bundle, *, expected_version: str) -> None:
    """Refuse a bundle whose files, hashes, version, seal or audit do not agree."""
    meta = bundle.meta
    if meta.format != BUNDLE_FORMAT:
        raise BundleError(f"bundle {expected_version} has format {meta.format}; upgrade hookbus")
    for f in bundle.files:
        _check_relative(f.path)
        if hashlib.sha256(f.data).hexdigest() != f.sha256:
            raise BundleError(f"bundle {expected_version}: {f.path} does not match its hash")
        if f.mode not in (EXEC_MODE, PLAIN_MODE):
            raise BundleError(f"bundle {expected_version}: {f.path} has mode {f.mode:o}")
    digest = content_hash(bundle.files)
    if digest != meta.content_hash or version_of(digest) != meta.version:
        raise BundleError(f"bundle {expected_version}: content does not match its version")
    if meta.version != expected_version:
        raise BundleError(f"bundle stored as {expected_version} says it is {meta.version}")
    if meta.seal != _seal(digest, meta.audit):
        raise BundleError(f"bundle {expected_version}: audit summary does not match its seal")
    if meta.audit.critical:
        raise BundleError(
            f"bundle {expected_version} carries {meta.audit.critical} critical audit finding(s)"
        )


def _check_relative(path: str) -> PurePosixPath:
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


# --- local cache ------------------------------------------------------------------------


def default_cache_root(settings: Settings) -> Path:
    """Where workers write bundle files: ``<reload.data_dir>/bundles/<ns>`` or a private
    folder under the system temp dir."""
    if settings.reload.data_dir:
        base = Path(settings.reload.data_dir).expanduser() / "bundles"
    else:
        base = Path(tempfile.gettempdir()) / f"hookbus-{os.getuid()}" / "bundles"
    return base / settings.namespace


def check_private(folder: Path) -> None:
    """Refuse a cache folder other local users could write to (or swap out).

    Workers execute the files they cache, so under a shared temp dir the folder and its
    ancestors must belong to this user (or root) and not be writable by group or others, up
    to a sticky shared folder such as ``/tmp`` or a folder of root's.
    """
    uid = os.getuid()
    path = folder.resolve()
    while True:
        st = path.lstat()
        shared_sticky = st.st_mode & 0o002 and st.st_mode & stat.S_ISVTX
        if shared_sticky and st.st_uid in (0, uid):
            return  # a sticky shared folder such as /tmp: nobody can swap our entries
        if st.st_uid not in (0, uid):
            raise BundleError(
                f"bundle cache {folder}: {path} belongs to another user (uid {st.st_uid}); "
                "set reload.data_dir to a private folder"
            )
        if st.st_mode & 0o022:
            raise BundleError(
                f"bundle cache {folder}: {path} is writable by other users; "
                "fix its permissions or set reload.data_dir to a private folder"
            )
        if st.st_uid == 0 and uid != 0:
            return  # root's folder, not writable by others: trusted from here up
        if path.parent == path:
            return
        path = path.parent


def materialise(bundle: Bundle, cache_root: Path, *, private: bool = False) -> Path:
    """Write a bundle's files under ``cache_root/<version>`` (once; reused afterwards).

    Several workers on one host may do this at once: each writes a private temporary folder
    and renames it into place, so the version folder is complete whenever it exists. With
    ``private`` (the default cache under the system temp dir) the folder's ownership and
    permissions are checked first (:func:`check_private`).
    """
    cache_root.mkdir(parents=True, exist_ok=True, mode=0o700)
    if private:
        check_private(cache_root)
    final = cache_root / bundle.version
    if final.is_dir():
        with contextlib.suppress(OSError):
            os.utime(final)
        return final
    tmp = Path(tempfile.mkdtemp(prefix=f".{bundle.version}.", dir=cache_root))
    try:
        for f in bundle.files:
            rel = _check_relative(f.path)
            target = tmp.joinpath(*rel.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, f.mode)
            with os.fdopen(fd, "wb") as fh:
                fh.write(f.data)
            os.chmod(target, f.mode)
        os.chmod(tmp, 0o755)
        try:
            os.rename(tmp, final)
        except OSError:
            if not final.is_dir():
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # removed meanwhile by another worker's clean-up
        return 0.0


def clean_cache(cache_root: Path, *, keep: int, in_use: Sequence[str] = ()) -> list[str]:
    """Remove all but the ``keep`` most recently used version folders (never ``in_use``)."""
    if not cache_root.is_dir():
        return []
    dirs = [p for p in cache_root.iterdir() if p.is_dir() and not p.name.startswith(".")]
    dirs.sort(key=_mtime, reverse=True)
    removed = []
    for p in dirs[max(1, keep) :]:
        if p.name in in_use:
            continue
        shutil.rmtree(p, ignore_errors=True)
        removed.append(p.name)
    return removed


# --- single-host stamp file (seed 000) --------------------------------------------------


def stamp_file_path(settings: Settings) -> Path | None:
    """``<reload.data_dir>/hooks_reload.stamp``, or None when no data dir is configured."""
    if not settings.reload.data_dir:
        return None
    return Path(settings.reload.data_dir).expanduser() / STAMP_FILENAME


def write_stamp_file(settings: Settings, version: str) -> Path | None:
    """Write the stamp file (atomically) when a data dir is configured."""
    path = stamp_file_path(settings)
    if path is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    body = json.dumps({"version": version, "ts_ms": now_ms()}) + "\n"
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(body)
    os.replace(tmp, path)
    return path


def read_stamp_file(path: Path) -> tuple[int, str | None] | None:
    """(mtime in ns, version or None) of the stamp file, or None when there is none."""
    try:
        st = path.stat()
        text = path.read_text()
    except FileNotFoundError:
        return None
    version: str | None = None
    try:
        data = json.loads(text)
        if isinstance(data, dict) and isinstance(data.get("version"), str):
            version = data["version"]
    except json.JSONDecodeError:
        version = None
    return st.st_mtime_ns, version
