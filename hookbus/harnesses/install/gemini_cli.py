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
from pathlib import Path
from typing import Any, Literal

from hookbus.harnesses.adapters import Route, unavailable_reason
from hookbus.harnesses.gemini_adapter import ADAPTER, NAME, SETTINGS
from hookbus.harnesses.install import table
from hookbus.harnesses.install.command_settings import CommandSettings

Scope = Literal["user", "project", "managed"]

#: Timeout of a hook entry, in seconds (written in ms; the command's deadline stays under).
ENTRY_TIMEOUT_S = 10
#: Gemini CLI's system settings on Linux (every user; over user and project settings), and
#: the variable that moves them.
SYSTEM_SETTINGS = "/etc/gemini-cli/settings.json"
SYSTEM_SETTINGS_ENV = "GEMINI_CLI_SYSTEM_SETTINGS_PATH"


def installable_events() -> list[str]:
    """Every event the installer registers by default, in the table's order."""
    return table.installable_events(ADAPTER)


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
    return table.home_path(SETTINGS[scope], home, project)


def _down(route: Route) -> dict[str, Any]:
    """Gemini CLI's deny when hookbus cannot run (the same form on every event)."""
    return {"decision": "deny", "reason": unavailable_reason(f"hookbus {NAME} hook could not run")}


#: Gemini CLI's hook entries, install and uninstall.
HOOKS = CommandSettings(ADAPTER, label="Gemini CLI", down=_down, timeout_s=ENTRY_TIMEOUT_S)
entry_for = HOOKS.entry_for
is_ours = HOOKS.is_ours
install = HOOKS.install
uninstall = HOOKS.uninstall


def _path(scope: str, root: Path | None) -> Path:
    return settings_path(scope, root=root)  # type: ignore[arg-type]


INSTALLER = table.file_installer(
    scopes={
        "user": SETTINGS["user"],
        "project": SETTINGS["project"],
        "managed": f"${SYSTEM_SETTINGS_ENV}, else {SYSTEM_SETTINGS}",
    },
    settings_path=_path,
    install=install,
    uninstall=uninstall,
    entries=lambda path: table.json_entries(path, is_ours),
)
