"""One entry of the fleet's change history: its fields, its hash and how it is read back.

An entry's ``hash`` is the SHA-256 of ``prev`` (the hash of the entry before it) and its own
fields, canonically encoded; :func:`entry_hash` is that rule, shared by the append that
writes it and the check that re-computes it (both in :mod:`hookbus.bundles.history`). Kept
apart so the format of the chain is read in one place, without the Redis operations.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hookbus.bundles.model import BundleFile

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
