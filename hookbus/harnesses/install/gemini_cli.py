"""``hookbus gemini-cli install`` / ``uninstall``: Gemini CLI's settings.json hook entries.

Gemini CLI's ``settings.json`` has Claude Code's shape (``"hooks": {"<Event>": [{"hooks":
[<entry>]}]}``), so the merge, backup, dry run and exact uninstall are
:mod:`hookbus.harnesses.install.settings_file`'s. Each entry runs ``<hookbus> gemini-cli hook
--timeout N`` with ``timeout`` in *milliseconds* (Gemini CLI's unit). Gemini CLI has no
``onFailure``: a hook that cannot start (exit 127), fails or times out lets the tool run. So the
guard's command ends with ``|| printf '%s\\n' '<deny JSON>'``: the shell prints a deny whenever
hookbus itself did not answer with exit 0. No Redis URL is written: the hook reads
``HOOKBUS_*``, ``./hookbus.toml`` or the user's ``~/.config/hookbus/hookbus.toml`` (the only one
left when Gemini CLI strips the environment under ``GITHUB_SHA``).

A project's ``.gemini/settings.json`` is read only in a trusted folder (``--skip-trust`` or
``GEMINI_CLI_TRUST_WORKSPACE=true`` headless)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from hookbus.harnesses.adapters import unavailable_reason
from hookbus.harnesses.gemini_adapter import ADAPTER, NAME, SETTINGS
from hookbus.harnesses.install import hook_commands, settings_file, table
from hookbus.harnesses.install.claude_code import hookbus_command
from hookbus.harnesses.install.hook_commands import fail_closed
from hookbus.harnesses.install.settings_file import Change, Entry
from hookbus.harnesses.install.table import InstallError

Scope = Literal["user", "project", "managed"]
Mode = Literal["command", "http"]

#: Timeout of a hook entry, in seconds (written in ms; the command's deadline stays under).
ENTRY_TIMEOUT_S = 10
#: Gemini CLI's system settings on Linux (every user; over user and project settings), and
#: the variable that moves them.
SYSTEM_SETTINGS = "/etc/gemini-cli/settings.json"
SYSTEM_SETTINGS_ENV = "GEMINI_CLI_SYSTEM_SETTINGS_PATH"


def installable_events() -> list[str]:
    """Every event the installer registers by default, in the table's order."""
    return [name for name, route in ADAPTER.routes.items() if route.install]


def settings_path(
    scope: Scope, *, home: Path | None = None, project: Path | None = None, root: Path | None = None
) -> Path:
    """The settings file of ``scope``: user (``~/.gemini``), project (``./.gemini``) or
    managed (the system settings: ``$GEMINI_CLI_SYSTEM_SETTINGS_PATH``, else
    ``/etc/gemini-cli/settings.json``; under ``root`` when given)."""
    if scope == "managed":
        moved = os.environ.get(SYSTEM_SETTINGS_ENV)
        if moved and root is None:
            return Path(moved)
        return table.rooted(SYSTEM_SETTINGS, root)
    template = SETTINGS[scope]
    if template.startswith("~/"):
        return (home or Path.home()) / template[2:]
    return (project or Path.cwd()) / template


def entry_for(event: str, *, command: str, mode: Mode = "command", url: str = "") -> Entry:
    """The hook entry hookbus writes for ``event``: the lean command, or in ``http`` mode a
    ``curl`` to the gateway (:mod:`hookbus.harnesses.install.hook_commands`)."""
    route = ADAPTER.route(event)
    timeout = ENTRY_TIMEOUT_S
    if hook_commands.parkable(route.kind, route.mode):
        timeout = hook_commands.PARKED_TIMEOUT_S
    if mode == "http":
        line = hook_commands.gateway_command(
            url or hook_commands.DEFAULT_GATEWAY_URL, NAME, timeout
        )
    else:
        line = hook_commands.hook_command(command, NAME, timeout)
    if ADAPTER.route(event).guard:
        reason = unavailable_reason(f"hookbus {NAME} hook could not run")
        line = fail_closed(line, {"decision": "deny", "reason": reason})
    elif mode == "http":
        line = hook_commands.passes_on_failure(line)
    return {"type": "command", "command": line, "timeout": timeout * 1000}


def is_ours(entry: Mapping[str, Any]) -> bool:
    """Whether a hook entry is one hookbus wrote (by what it calls)."""
    command = entry.get("command")
    return isinstance(command, str) and hook_commands.calls_hookbus(command, NAME)


def _wanted(events: Iterable[str], command: str, mode: Mode, url: str) -> dict[str, Entry]:
    wanted: dict[str, Entry] = {}
    for event in events:
        if event not in ADAPTER.routes:
            known = ", ".join(installable_events())
            raise InstallError(event, f"not a Gemini CLI event; choose from {known}")
        wanted[event] = entry_for(event, command=command, mode=mode, url=url)
    return wanted


def install(
    path: Path,
    *,
    events: Iterable[str] | None = None,
    command: str | None = None,
    mode: Mode = "command",
    url: str | None = None,
    dry_run: bool = False,
) -> Change:
    """Merge hookbus's entries into ``path`` (the rules of :mod:`..install.settings_file`)."""
    wanted = _wanted(
        installable_events() if events is None else events,
        command or hookbus_command(),
        mode,
        url or hook_commands.DEFAULT_GATEWAY_URL,
    )
    return settings_file.apply(
        path, lambda data: settings_file.merge(data, wanted, is_ours), dry_run=dry_run
    )


def uninstall(path: Path, *, dry_run: bool = False) -> Change:
    """Remove exactly the entries hookbus wrote to ``path``."""
    return settings_file.apply(
        path, lambda data: ((), settings_file.remove(data, is_ours)), dry_run=dry_run
    )


def _path(scope: str, root: Path | None) -> Path:
    return settings_path(scope, root=root)  # type: ignore[arg-type]


def _install(
    path: Path,
    *,
    scope: str | None,
    root: Path | None = None,
    mode: Mode,
    events: Iterable[str] | None,
    url: str | None,
    command: str | None,
    dry_run: bool,
) -> table.Outcome:
    change = install(path, events=events, command=command, mode=mode, url=url, dry_run=dry_run)
    return table.readable_when_managed(table.single(change), scope, dry_run)


def _uninstall(
    path: Path, *, scope: str | None, dry_run: bool, root: Path | None = None
) -> table.Outcome:
    return table.single(uninstall(path, dry_run=dry_run))


INSTALLER = table.Installer(
    scopes={
        "user": SETTINGS["user"],
        "project": SETTINGS["project"],
        "managed": f"${SYSTEM_SETTINGS_ENV}, else {SYSTEM_SETTINGS}",
    },
    settings_path=_path,
    install=_install,
    uninstall=_uninstall,
    entries=lambda path: table.json_entries(path, is_ours),
    file_kind="settings.json",
)
