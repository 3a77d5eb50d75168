"""Who changed the hook fleet: an append-only, hash-chained stream of every change.

Each write, approval, rejection, reload and rollback appends one entry to the namespace's
history stream (``hookbus:{ns}:history``): ``action``, ``actor``, ``hook``, ``sha256`` (of the
hook's files, or of the whole bundle for a reload), ``at`` (ms) and ``extra`` (JSON). Every
entry also carries ``prev``, the hash of the entry before it, and ``hash``, the SHA-256 of
``prev`` and its own fields. Editing an entry, deleting one from the middle or inserting one
breaks the chain, and :func:`verify` says where.

What the chain alone cannot see: the newest entries removed from the end (the chain up to
there is intact) and a writer who rewrites the whole stream from the first changed entry on.
So each release and rollback is written here before its bundle is signed, and the signature
covers this entry's hash and the entry count (:func:`anchor_breaks`): a history cut back
past the current bundle's release is reported. The shipped ACL lets only the operator user
write this key (deploy/redis/README.md).

Appends are serialised with WATCH/MULTI on the stream: two concurrent appends cannot both
chain onto the same predecessor. An entry's ``hash`` is :func:`entry_hash`, one rule shared
by the append that writes it and the check that re-computes it; :func:`parse_entry` reads an
entry back.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import redis

from hookbus.bus.connection import client_url, translated
from hookbus.bus.keys import Keys, hook_history
from hookbus.bus.wire import now_ms
from hookbus.errors import RedisCommandError

if TYPE_CHECKING:
    from hookbus.bundles.model import BundleFile


log = logging.getLogger(__name__)

#: ``prev`` of the first entry.
GENESIS = "0" * 64
#: Fields of an entry, in stream order.
FIELDS = ("action", "actor", "hook", "sha256", "at", "extra", "prev", "hash")


@dataclass(frozen=True)
class Entry:
    """One recorded change. ``id`` is the stream entry id."""

    id: str
    action: str
    actor: str
    hook: str
    sha256: str
    at: int
    extra: dict[str, Any] = field(default_factory=dict)
    prev: str = GENESIS
    hash: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "action": self.action,
            "actor": self.actor,
            "hook": self.hook,
            "sha256": self.sha256,
            "at": self.at,
            "extra": self.extra,
            "prev": self.prev,
            "hash": self.hash,
        }


def entry_hash(
    prev: str, action: str, actor: str, hook: str, sha256: str, at: int, extra: str
) -> str:
    """The hash of one entry: SHA-256 over ``prev`` and its fields, canonically encoded."""
    body = json.dumps(
        [prev, action, actor, hook, sha256, at, extra], separators=(",", ":"), ensure_ascii=True
    )
    return hashlib.sha256(body.encode()).hexdigest()


def files_digest(files: Iterable[BundleFile]) -> str:
    """SHA-256 over files' paths, modes and hashes: what ``sha256`` holds for a hook."""
    digest = hashlib.sha256()
    for f in sorted(files, key=lambda f: f.path):
        digest.update(f"{f.path}\0{f.mode:o}\0{f.sha256}\n".encode())
    return digest.hexdigest()


def as_text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def parse_entry(entry_id: Any, raw: Mapping[Any, Any] | None) -> tuple[Entry, str]:
    """(entry, its ``extra`` as stored): the stored text is what the hash covers."""
    data = {as_text(k): as_text(v) for k, v in (raw or {}).items()}
    extra_text = data.get("extra", "{}")
    try:
        extra = json.loads(extra_text)
    except json.JSONDecodeError:
        extra = {"unreadable": extra_text}
    try:
        at = int(data.get("at", "0"))
    except ValueError:
        at = -1
    entry = Entry(
        id=as_text(entry_id),
        action=data.get("action", ""),
        actor=data.get("actor", ""),
        hook=data.get("hook", ""),
        sha256=data.get("sha256", ""),
        at=at,
        extra=extra if isinstance(extra, dict) else {"value": extra},
        prev=data.get("prev", ""),
        hash=data.get("hash", ""),
    )
    return entry, extra_text


#: Actions the fleet records.
ACTIONS = (
    "write",
    "approve",
    "reject",
    "reload",
    "rollback",
    "state-reset",
    "notice",
    "notice-retract",
    "decide",
)
#: How often an append retries when another append won the race, before giving up.
APPEND_ATTEMPTS = 20
#: Entries read per XRANGE call when walking the stream.
READ_BATCH = 1000


@dataclass(frozen=True)
class ChainReport:
    """What :func:`verify` found: ``ok`` when every entry chains onto the one before it."""

    entries: int
    breaks: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.breaks


def append(
    client: redis.Redis,
    namespace: str,
    *,
    action: str,
    actor: str,
    hook: str,
    sha256: str,
    extra: Mapping[str, Any] | None = None,
) -> Entry:
    """Record one change at the end of the chain and return it."""
    if action not in ACTIONS:
        raise ValueError(f"unknown history action {action!r}; one of {', '.join(ACTIONS)}")
    key = hook_history(namespace)
    extra_text = json.dumps(dict(extra or {}), sort_keys=True, separators=(",", ":"))
    with translated(client_url(client)):
        for _ in range(APPEND_ATTEMPTS):
            with client.pipeline(transaction=True) as pipe:
                try:
                    pipe.watch(key)  # type: ignore[no-untyped-call]
                    last = pipe.xrevrange(key, "+", "-", count=1)
                    prev = parse_entry(last[0][0], last[0][1])[0].hash if last else GENESIS
                    at = now_ms()
                    digest = entry_hash(prev, action, actor, hook, sha256, at, extra_text)
                    fields = {
                        "action": action,
                        "actor": actor,
                        "hook": hook,
                        "sha256": sha256,
                        "at": str(at),
                        "extra": extra_text,
                        "prev": prev,
                        "hash": digest,
                    }
                    pipe.multi()
                    pipe.xadd(key, fields)  # type: ignore[arg-type]
                    (entry_id,) = pipe.execute()
                except redis.WatchError:
                    continue
            log.info("history: %s %s by %s (%s)", action, hook, actor, sha256[:12])
            return Entry(
                id=as_text(entry_id),
                action=action,
                actor=actor,
                hook=hook,
                sha256=sha256,
                at=at,
                extra=json.loads(extra_text),
                prev=prev,
                hash=digest,
            )
    raise RedisCommandError(
        f"history of namespace {namespace!r}: {APPEND_ATTEMPTS} concurrent appends won the race; "
        "try again"
    )


def length(client: redis.Redis, namespace: str) -> int:
    """How many entries the history holds."""
    with translated(client_url(client)):
        return int(client.xlen(hook_history(namespace)))


def anchor_breaks(client: redis.Redis, namespace: str, head: str, count: int) -> list[str]:
    """What is wrong with the history against the anchor the current bundle's signature
    covers (its last entry's hash ``head`` and the entry count ``count`` then): the entry
    gone, or fewer entries than then. The chain itself cannot show entries cut from its
    end; the anchor can."""
    if not head:
        return []
    entries = read(client, namespace)
    if not any(entry.hash == head for entry in entries):
        return [
            f"the history's entry {head[:12]}, which the current bundle's signature anchors, "
            f"is missing: entries were removed from its end ({len(entries)} left, "
            f"{count} when the bundle was released)"
        ]
    if len(entries) < count:
        return [
            f"the history has {len(entries)} entries, fewer than the {count} it had when the "
            "current bundle was released: entries were removed"
        ]
    return []


def _walk(client: redis.Redis, namespace: str) -> Iterable[tuple[Entry, str]]:
    key = hook_history(namespace)
    start = "-"
    with translated(client_url(client)):
        while True:
            batch = client.xrange(key, start, "+", count=READ_BATCH)
            for entry_id, raw in batch:  # type: ignore[union-attr]
                yield parse_entry(entry_id, raw)
            if len(batch) < READ_BATCH:  # type: ignore[arg-type]
                return
            start = "(" + as_text(batch[-1][0])  # type: ignore[index]


def read(client: redis.Redis, namespace: str) -> list[Entry]:
    """Every entry, oldest first."""
    return [entry for entry, _ in _walk(client, namespace)]


def verify(client: redis.Redis, namespace: str) -> ChainReport:
    """Walk the chain and report every entry that does not follow from the one before it."""
    breaks: list[str] = []
    prev = GENESIS
    count = 0
    for entry, extra_text in _walk(client, namespace):
        count += 1
        expected = entry_hash(
            entry.prev, entry.action, entry.actor, entry.hook, entry.sha256, entry.at, extra_text
        )
        if entry.hash != expected:
            breaks.append(f"entry {entry.id}: its hash does not match its content (edited)")
        if entry.prev != prev:
            breaks.append(
                f"entry {entry.id}: does not follow the entry before it "
                "(an entry was deleted, inserted or edited)"
            )
        prev = entry.hash
    return ChainReport(entries=count, breaks=breaks)


def verify_anchored(client: redis.Redis, namespace: str) -> ChainReport:
    """:func:`verify`, plus the history's tail against the anchor of the current bundle
    (:func:`anchor_breaks`): a history cut back from its end is a break too."""
    from hookbus.bundles import store

    keys = Keys.for_namespace(namespace)
    report = verify(client, namespace)
    version = store.current_version(client, keys)
    meta = store.fetch_meta(client, keys, version) if version else None
    if meta is None:
        return report
    tail = anchor_breaks(client, namespace, meta.history_head, meta.history_len)
    return ChainReport(entries=report.entries, breaks=[*report.breaks, *tail])
