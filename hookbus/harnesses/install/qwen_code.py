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

from pathlib import Path
from typing import Any

from hookbus.harnesses.adapters import Route
from hookbus.harnesses.install import hook_commands, table
from hookbus.harnesses.install.command_settings import CommandSettings
from hookbus.harnesses.qwen_adapter import ADAPTER, SETTINGS

#: Timeout of a hook entry, in seconds (written in ms; the command's deadline stays under).
ENTRY_TIMEOUT_S = 10


def installable_events() -> list[str]:
    """Every event the installer registers by default, in the table's order."""
    return table.installable_events(ADAPTER)


def settings_path(scope: str, *, home: Path | None = None, project: Path | None = None) -> Path:
    """The settings file of ``scope``: user (``~/.qwen``) or project (``./.qwen``)."""
    return table.home_path(SETTINGS[scope], home, project)


def unavailable_body(event: str) -> dict[str, Any]:
    """What the adapter prints for ``event`` when hookbus cannot answer (a guard's deny)."""
    return hook_commands.unavailable_output(ADAPTER, ADAPTER.route(event))


def _down(route: Route) -> dict[str, Any]:
    return hook_commands.unavailable_output(ADAPTER, route)


#: Qwen Code's hook entries, install and uninstall.
HOOKS = CommandSettings(ADAPTER, label="Qwen Code", down=_down, timeout_s=ENTRY_TIMEOUT_S)
entry_for = HOOKS.entry_for
is_ours = HOOKS.is_ours
install = HOOKS.install
uninstall = HOOKS.uninstall


INSTALLER = table.file_installer(
    scopes={"user": SETTINGS["user"], "project": SETTINGS["project"]},
    settings_path=lambda scope, root: settings_path(scope),
    install=install,
    uninstall=uninstall,
    entries=lambda path: table.json_entries(path, is_ours),
)
