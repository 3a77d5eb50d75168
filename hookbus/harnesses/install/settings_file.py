"""Merging hookbus's hook entries into an agent CLI's JSON settings file, and taking them out.

Claude Code's ``settings.json`` (and Gemini CLI's, which copies its shape) holds
``"hooks": {"<Event>": [{"matcher": "...", "hooks": [<entry>, ...]}, ...]}``. The installer:

* adds one matcher group per event holding one hookbus entry (a command, or an ``http`` call
  to the gateway), and changes nothing else: the user's own hooks, other events and every
  other key stay as they are, in their order;
* is idempotent: a second run finds every entry as it would write it and changes nothing;
  an entry of an earlier run that differs (another timeout, command or URL) is replaced;
* recognises its entries by what they call (``<hookbus> <cli> hook``, or the gateway path
  ``/v1/hooks/<cli>``), so ``uninstall`` removes exactly those and the groups / events it
  emptied;
* refuses a file that is not a JSON object, or whose ``hooks`` table is malformed, without
  touching it; writes atomically (temporary file + rename), keeping the file's mode and
  owner (a 0600 file holds API keys);
* backs the file up before its first change (``<file>.hookbus-backup``, with the file's mode
  and owner) and never overwrites that copy: a later install or an uninstall would replace
  the only pre-install copy with hookbus's own edit;
* writes no Redis URL: the hook finds Redis through ``HOOKBUS_*`` or hookbus.toml, so one
  settings file serves every environment.
"""

from __future__ import annotations

import difflib
import json
import os
import shlex
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hookbus.errors import HookBusError

BACKUP_SUFFIX = ".hookbus-backup"

Entry = dict[str, Any]


class SettingsFileError(HookBusError):
    """The settings file cannot be read as the agent CLI's JSON settings; it was not changed."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}; the file was not changed (fix it, or pass --settings)")
        self.path = path
        self.reason = reason


@dataclass(frozen=True)
class Change:
    """The outcome of an install / uninstall: the text before and after, and what moved."""

    path: Path
    before: str | None
    after: str
    added: tuple[str, ...]
    removed: tuple[str, ...]

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        """A unified diff of the file, for people to read before (or after) it is written."""
        return "".join(
            difflib.unified_diff(
                (self.before or "").splitlines(keepends=True),
                self.after.splitlines(keepends=True),
                fromfile=f"{self.path} (before)",
                tofile=f"{self.path} (after)",
            )
        )


def read_settings(path: Path) -> tuple[str | None, dict[str, Any]]:
    """The file's text (None when absent) and its JSON object; SettingsFileError otherwise."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, {}
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsFileError(path, f"cannot read it ({exc})") from exc
    if not text.strip():
        return text, {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise SettingsFileError(path, f"not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise SettingsFileError(path, "not a JSON object")
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise SettingsFileError(path, '"hooks" is not an object')
    for event, groups in hooks.items():
        if not isinstance(groups, list) or not all(
            isinstance(g, dict) and isinstance(g.get("hooks", []), list) for g in groups
        ):
            raise SettingsFileError(path, f'"hooks.{event}" is not a list of matcher groups')
    return text, data


def render_settings(data: Mapping[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def merge(
    data: dict[str, Any],
    wanted: Mapping[str, Entry],
    is_ours: Callable[[Mapping[str, Any]], bool],
) -> tuple[list[str], list[str]]:
    """Put ``wanted[event]`` into ``data`` for each event (in place); drop our entries of
    other events. Returns (events added or changed, events removed)."""
    hooks: dict[str, Any] = data.setdefault("hooks", {})
    added: list[str] = []
    for event, entry in wanted.items():
        groups: list[dict[str, Any]] = hooks.setdefault(event, [])
        found = [(g, h) for g in groups for h in g.get("hooks", []) if is_ours(h)]
        if len(found) == 1 and found[0][1] == entry and "matcher" not in found[0][0]:
            continue
        _strip(groups, is_ours)
        groups.append({"hooks": [entry]})
        added.append(event)
    removed = [
        event for event in list(hooks) if event not in wanted and _strip(hooks[event], is_ours)
    ]
    _prune(data)
    return added, removed


def remove(data: dict[str, Any], is_ours: Callable[[Mapping[str, Any]], bool]) -> list[str]:
    """Take every entry of ours out of ``data`` (in place); the events it touched."""
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return []
    removed = [event for event in list(hooks) if _strip(hooks[event], is_ours)]
    _prune(data)
    return removed


def _strip(groups: list[dict[str, Any]], is_ours: Callable[[Mapping[str, Any]], bool]) -> bool:
    """Remove our entries from ``groups`` and the groups they leave empty; True if any."""
    touched = False
    for group in list(groups):
        entries = group.get("hooks", [])
        kept = [h for h in entries if not (isinstance(h, dict) and is_ours(h))]
        if len(kept) != len(entries):
            touched = True
            if kept:
                group["hooks"] = kept
            else:
                groups.remove(group)
    return touched


def _prune(data: dict[str, Any]) -> None:
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return
    for event in [e for e, groups in hooks.items() if groups == []]:
        del hooks[event]
    if not hooks:
        del data["hooks"]


def apply(
    path: Path,
    edit: Callable[[dict[str, Any]], tuple[Iterable[str], Iterable[str]]],
    *,
    dry_run: bool,
) -> Change:
    """Read ``path``, ``edit`` its data, and (unless ``dry_run`` or nothing changed) back
    the old file up and write the new one atomically."""
    before, data = read_settings(path)
    added, removed = edit(data)
    after = render_settings(data) if data or before is not None else ""
    if before is not None and before.strip() and json.loads(before) == data:
        after = before  # nothing changed: keep the user's formatting byte for byte
    change = Change(path, before, after, tuple(added), tuple(removed))
    if dry_run or not change.changed:
        return change
    write_change(change)
    return change


def apply_merge(
    path: Path,
    wanted: Mapping[str, Entry],
    is_ours: Callable[[Mapping[str, Any]], bool],
    *,
    dry_run: bool,
) -> Change:
    """:func:`apply` of :func:`merge`: ``wanted`` into ``path``, everything else kept."""
    return apply(path, lambda data: merge(data, wanted, is_ours), dry_run=dry_run)


def apply_remove(
    path: Path, is_ours: Callable[[Mapping[str, Any]], bool], *, dry_run: bool
) -> Change:
    """:func:`apply` of :func:`remove`: exactly our entries out of ``path``."""
    return apply(path, lambda data: ((), remove(data, is_ours)), dry_run=dry_run)


def backup_path(path: Path) -> Path:
    """Where the copy of ``path`` as it was before hookbus first changed it is kept."""
    return path.with_name(path.name + BACKUP_SUFFIX)


def write_change(change: Change) -> None:
    """Back the old file up (the first time only) and write the new text atomically,
    keeping the file's mode and owner: a crash never leaves a half-written settings file,
    and neither the file nor its backup is readable by more people than before."""
    path, before, after = change.path, change.before, change.after
    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.stat() if path.exists() else None
    if before is not None and old is not None:
        _write_backup(backup_path(path), before, old)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(after)
            if old is not None:
                _keep_owner(fh.fileno(), old)
                os.fchmod(fh.fileno(), old.st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_backup(backup: Path, text: str, old: os.stat_result) -> None:
    """Create ``backup`` holding ``text`` with the mode and owner of the file it copies;
    an existing backup is the first pre-install copy and stays as it is."""
    try:
        fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
        _keep_owner(fh.fileno(), old)
        os.fchmod(fh.fileno(), old.st_mode & 0o7777)


def _keep_owner(fd: int, old: os.stat_result) -> None:
    """Give the open file ``fd`` the owner and group of ``old`` (an installer run as root
    on a user's file must leave it theirs); a user who may not change them (not root, not
    in the group) keeps their own, as any editor would."""
    try:
        os.fchown(fd, old.st_uid, old.st_gid)
    except PermissionError:
        return


def command_calls(command: str, cli: str) -> bool:
    """Whether a command string runs ``hookbus <cli> hook`` (any path to hookbus, or
    ``python -m hookbus``, any options after it)."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return False
    for i in range(len(argv) - 1):
        if argv[i] == cli and argv[i + 1] == "hook":
            head = argv[:i]
            if head and Path(head[0]).name == "hookbus":
                return True
            if any(head[j : j + 2] == ["-m", "hookbus"] for j in range(1, len(head) - 1)):
                return True
    return False
