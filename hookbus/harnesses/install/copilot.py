"""``hookbus copilot install`` / ``uninstall``: GitHub Copilot CLI's hooks file.

Copilot CLI reads every ``*.json`` of ``~/.copilot/hooks/`` (user) and of a project's
``.github/hooks/`` (trusted folders only), each ``{"version": 1, "hooks": {"<Event>":
[<entry>, ...]}}`` with entries ``{"type": "command", "bash": ..., "timeoutSec": N}`` listed
directly under the event (no matcher groups). hookbus writes its own file, ``hookbus.json``,
in that folder; the entries go under Claude Code's event names, which give Claude Code's
input shape. The guards' commands end with ``|| printf '%s\\n' '<deny JSON>'``: Copilot
denies a tool call on any non-zero exit, but with its own text, so a hookbus that cannot
start still denies with a reason that says why. Idempotent; entries of anyone else in the
same file stay; ``uninstall`` removes exactly ours (and the file when nothing else is left);
backup, dry run and atomic write are :mod:`hookbus.harnesses.install.settings_file`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from hookbus.harnesses.adapters import Route
from hookbus.harnesses.copilot_adapter import ADAPTER, NAME, SETTINGS
from hookbus.harnesses.install import hook_commands, settings_file, table
from hookbus.harnesses.install.claude_code import hookbus_command
from hookbus.harnesses.install.settings_file import Change, Entry

Mode = Literal["command", "http"]

#: Timeout of a hook entry, in seconds (the command's deadline stays 0.5 s under it).
ENTRY_TIMEOUT_S = 10
#: The hooks file format version Copilot CLI reads.
FILE_VERSION = 1


def installable_events() -> list[str]:
    """Every event the installer registers by default, in the table's order."""
    return table.installable_events(ADAPTER)


def settings_path(scope: str, *, home: Path | None = None, project: Path | None = None) -> Path:
    """hookbus's hooks file of ``scope``: user (``~/.copilot/hooks``) or project
    (``./.github/hooks``)."""
    return table.home_path(SETTINGS[scope], home, project)


def _down(route: Route) -> dict[str, Any]:
    return hook_commands.unavailable_output(ADAPTER, route)


def entry_for(event: str, *, command: str, mode: Mode = "command", url: str = "") -> Entry:
    """The hook entry hookbus writes for ``event`` (a request an operator may be asked about
    waits longer than ``approvals.wait_s``: its entry's timeout is above it)."""
    line, timeout = hook_commands.shell_entry(
        ADAPTER.route(event),
        ENTRY_TIMEOUT_S,
        cli=NAME,
        mode=mode,
        command=command,
        url=url,
        down=_down,
    )
    return {"type": "command", "bash": line, "timeoutSec": timeout}


def is_ours(entry: Mapping[str, Any]) -> bool:
    """Whether a hook entry is one hookbus wrote (by what it calls)."""
    return hook_commands.entry_calls_hookbus(entry, "bash", NAME)


def _strip(hooks: dict[str, Any]) -> list[str]:
    """Take our entries out of ``hooks`` (and the events they leave empty); events touched."""
    touched = []
    for event in list(hooks):
        entries = hooks[event]
        kept = [e for e in entries if not (isinstance(e, dict) and is_ours(e))]
        if len(kept) != len(entries):
            touched.append(event)
            if kept:
                hooks[event] = kept
            else:
                del hooks[event]
    return touched


def _entries(path: Path) -> list[tuple[str, Mapping[str, Any]]]:
    """hookbus's entries in a Copilot CLI hooks file (listed directly under each event)."""
    _, data = settings_file.read_settings(path)
    return [
        (event, entry)
        for event, entries in data.get("hooks", {}).items()
        for entry in entries
        if isinstance(entry, dict) and is_ours(entry)
    ]


def _merge(data: dict[str, Any], wanted: Mapping[str, Entry]) -> tuple[list[str], list[str]]:
    hooks: dict[str, Any] = data.setdefault("hooks", {})
    before = {e: [h for h in hooks.get(e, []) if is_ours(h)] for e in hooks}
    _strip(hooks)
    for event, entry in wanted.items():
        hooks.setdefault(event, []).append(entry)
    if "version" not in data:  # first, as Copilot CLI's own files have it
        rest = dict(data)
        data.clear()
        data.update({"version": FILE_VERSION, **rest})
    added = [e for e, entry in wanted.items() if before.get(e) != [entry]]
    removed = [e for e, mine in before.items() if mine and e not in wanted]
    if not hooks:
        del data["hooks"]
    return added, removed


def _remove(data: dict[str, Any]) -> tuple[list[str], list[str]]:
    hooks = data.get("hooks")
    removed = _strip(hooks) if isinstance(hooks, dict) else []
    if isinstance(hooks, dict) and not hooks:
        del data["hooks"]
    if set(data) <= {"version"}:
        data.clear()  # nothing of anyone else's is left: the file goes empty
    return [], removed


def install(
    path: Path,
    *,
    events: Iterable[str] | None = None,
    command: str | None = None,
    mode: Mode = "command",
    url: str | None = None,
    dry_run: bool = False,
) -> Change:
    """Merge hookbus's entries into ``path``; everything else in it stays."""
    hookbus = command or hookbus_command()
    wanted = table.wanted_entries(
        ADAPTER,
        events,
        "Copilot CLI",
        lambda event: entry_for(event, command=hookbus, mode=mode, url=url or ""),
    )
    return settings_file.apply(path, lambda data: _merge(data, wanted), dry_run=dry_run)


def uninstall(path: Path, *, dry_run: bool = False) -> Change:
    """Remove exactly the entries hookbus wrote to ``path``."""
    change = settings_file.apply(path, _remove, dry_run=True)
    if change.after.strip() in ("", "{}"):
        change = Change(change.path, change.before, "", change.added, change.removed)
        if not dry_run and change.before is not None:
            settings_file.write_change(change)
            change.path.unlink()
        return change
    return settings_file.apply(path, _remove, dry_run=dry_run)


INSTALLER = table.file_installer(
    scopes={"user": SETTINGS["user"], "project": SETTINGS["project"]},
    settings_path=lambda scope, root: settings_path(scope),
    install=install,
    uninstall=uninstall,
    entries=lambda path: _entries(path),
    file_kind="hooks file",
)
