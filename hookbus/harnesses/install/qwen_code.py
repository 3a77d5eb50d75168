"""``hookbus qwen-code install`` / ``uninstall``: Qwen Code's settings.json hook entries.

Qwen Code's ``settings.json`` has Claude Code's shape, so the merge, backup, dry run and
exact uninstall are :mod:`hookbus.harnesses.install.settings_file`'s. Each entry runs
``<hookbus> qwen-code hook --timeout N`` with ``timeout`` in *milliseconds* (Qwen Code's unit:
an entry of 3000 times out after 3 s). Qwen Code has no ``onFailure``, and a hook that cannot
start, fails or times out lets the tool run: the guards' commands end with ``|| printf
'%s\\n' '<deny JSON>'`` (the adapter's own answer for "hookbus is unavailable"), so the shell
prints a deny whenever hookbus itself did not answer with exit 0. In ``http`` mode an entry
is a ``curl`` to the gateway (:mod:`hookbus.harnesses.install.hook_commands`). No Redis URL
is written. A project's ``.qwen/settings.json`` applies in a trusted folder.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from hookbus.harnesses.adapters import Answer
from hookbus.harnesses.install import hook_commands, settings_file, table
from hookbus.harnesses.install.claude_code import hookbus_command
from hookbus.harnesses.install.hook_commands import fail_closed
from hookbus.harnesses.install.settings_file import Change, Entry
from hookbus.harnesses.install.table import InstallError
from hookbus.harnesses.qwen_adapter import ADAPTER, NAME, SETTINGS

Mode = Literal["command", "http"]

#: Timeout of a hook entry, in seconds (written in ms; the command's deadline stays under).
ENTRY_TIMEOUT_S = 10


def installable_events() -> list[str]:
    """Every event the installer registers by default, in the table's order."""
    return [name for name, route in ADAPTER.routes.items() if route.install]


def settings_path(scope: str, *, home: Path | None = None, project: Path | None = None) -> Path:
    """The settings file of ``scope``: user (``~/.qwen``) or project (``./.qwen``)."""
    return table.home_path(SETTINGS[scope], home, project)


def unavailable_body(event: str) -> dict[str, Any]:
    """What the adapter prints for ``event`` when hookbus cannot answer (a guard's deny)."""
    output = ADAPTER.render(
        ADAPTER.route(event), Answer(unavailable=f"hookbus {NAME} hook could not run")
    )
    return dict(output.stdout or {})


def entry_for(event: str, *, command: str, mode: Mode = "command", url: str = "") -> Entry:
    """The hook entry hookbus writes for ``event`` (a request an operator may be asked about
    waits longer than ``approvals.wait_s``: its entry's timeout is above it)."""
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
        line = fail_closed(line, unavailable_body(event))
    elif mode == "http":
        line = hook_commands.passes_on_failure(line)
    return {"type": "command", "command": line, "timeout": timeout * 1000}


def is_ours(entry: Mapping[str, Any]) -> bool:
    """Whether a hook entry is one hookbus wrote (by what it calls)."""
    command = entry.get("command")
    return isinstance(command, str) and hook_commands.calls_hookbus(command, NAME)


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
    hookbus = command or hookbus_command()
    wanted: dict[str, Entry] = {}
    for event in installable_events() if events is None else events:
        if event not in ADAPTER.routes:
            known = ", ".join(installable_events())
            raise InstallError(event, f"not a Qwen Code event; choose from {known}")
        wanted[event] = entry_for(event, command=hookbus, mode=mode, url=url or "")
    return settings_file.apply(
        path, lambda data: settings_file.merge(data, wanted, is_ours), dry_run=dry_run
    )


def uninstall(path: Path, *, dry_run: bool = False) -> Change:
    """Remove exactly the entries hookbus wrote to ``path``."""
    return settings_file.apply(
        path, lambda data: ((), settings_file.remove(data, is_ours)), dry_run=dry_run
    )


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
    return table.single(change)


def _uninstall(
    path: Path, *, scope: str | None, dry_run: bool, root: Path | None = None
) -> table.Outcome:
    return table.single(uninstall(path, dry_run=dry_run))


INSTALLER = table.Installer(
    scopes={"user": SETTINGS["user"], "project": SETTINGS["project"]},
    settings_path=lambda scope, root: settings_path(scope),
    install=_install,
    uninstall=_uninstall,
    entries=lambda path: table.json_entries(path, is_ours),
    file_kind="settings.json",
)
