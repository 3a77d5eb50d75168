"""Codex's hooks files read, and its trust records: what ``/hooks`` writes when a person
trusts a hook, and what hookbus's installer and ``hookbus doctor`` compare with it.

Codex records a trusted matcher group as ``[hooks.state."<config path>:<event_label>:<group
index>:<handler index>"] trusted_hash = "sha256:<hex>"``, the SHA-256 of the compact,
key-sorted JSON of the group's identity (``event_name`` in snake case, ``matcher`` when set,
each handler with ``async: false``). A group whose record is missing or whose hash differs
(edited since) is skipped silently.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.exceptions

from hookbus.harnesses.install.settings_file import SettingsFileError

#: The table of trust records inside ``[hooks]``.
STATE = "state"


def event_label(event: str) -> str:
    """Codex's key label of an event: ``PreToolUse`` -> ``pre_tool_use``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", event).lower()


def trust_key(path: Path, event: str, group: int, handler: int = 0) -> str:
    return f"{os.path.abspath(path)}:{event_label(event)}:{group}:{handler}"


def trust_hash(event: str, handlers: list[Mapping[str, Any]], matcher: str | None = None) -> str:
    """The hash Codex records for a trusted matcher group (handlers with Codex's defaults)."""
    identity: dict[str, Any] = {
        "event_name": event_label(event),
        "hooks": [{"async": False, **dict(h)} for h in handlers],
    }
    if matcher is not None:
        identity["matcher"] = matcher
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def read_toml(path: Path) -> tuple[str | None, tomlkit.TOMLDocument]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, tomlkit.document()
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsFileError(path, f"cannot read it ({exc})") from exc
    try:
        doc = tomlkit.parse(text)
    except tomlkit.exceptions.TOMLKitError as exc:
        raise SettingsFileError(path, f"not valid TOML ({exc})") from exc
    hooks = doc.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise SettingsFileError(path, '"hooks" is not a table')
    for event, groups in (hooks or {}).items():
        if event == STATE:
            if not isinstance(groups, dict):
                raise SettingsFileError(path, '"hooks.state" is not a table')
        elif not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
            raise SettingsFileError(path, f'"hooks.{event}" is not an array of tables')
    return text, doc


def hookbus_groups(
    path: Path, is_ours: Callable[[Mapping[str, Any]], bool]
) -> list[tuple[str, int, Mapping[str, Any]]]:
    """hookbus's handlers in a config.toml: (event, group index, handler)."""
    _, doc = read_toml(path)
    hooks = doc.get("hooks") or {}
    return [
        (event, index, handler)
        for event, groups in hooks.items()
        if event != STATE and isinstance(groups, list)
        for index, group in enumerate(groups)
        for handler in group.get("hooks", [])
        if isinstance(handler, dict) and is_ours(handler)
    ]


def untrusted_events(
    path: Path, trust_path: Path, is_ours: Callable[[Mapping[str, Any]], bool]
) -> list[str]:
    """The events of hookbus's groups in ``path`` that Codex would skip: no trust record in
    ``trust_path``, or one whose hash is not the group's (edited since)."""
    _, trust_doc = read_toml(trust_path)
    state = (trust_doc.get("hooks") or {}).get(STATE) or {}
    _, doc = read_toml(path)
    found = []
    for event, index, _ in hookbus_groups(path, is_ours):
        group = doc["hooks"][event][index]
        handlers: list[Mapping[str, Any]] = [dict(h) for h in group.get("hooks", [])]
        record = state.get(trust_key(path, event, index))
        wanted = trust_hash(event, handlers, group.get("matcher"))
        if not isinstance(record, dict) or record.get("trusted_hash") != wanted:
            found.append(event)
    return found
