"""``hookbus claude-code install`` / ``uninstall``: Claude Code's settings.json hook entries.

One entry per event of the adapter table that the installer may register (never
WorktreeCreate, whose hook replaces git's worktree creation, nor MessageDisplay). In
``command`` mode each entry runs ``<hookbus> claude-code hook --timeout N``; in ``http``
mode it posts to the gateway (``<url>/v1/hooks/claude-code``). Guards (PreToolUse,
PermissionRequest, PreModelSwitch) get ``"onFailure": "block"``, so that a hook that cannot
run at all (hookbus not installed, the gateway down, a crash) blocks instead of letting the
call through; every entry gets a ``timeout`` the command's own deadline stays under.
"""

from __future__ import annotations

import re
import shlex
import shutil
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from hookbus.harnesses.claude_adapter import ADAPTER, NAME, SETTINGS
from hookbus.harnesses.install import hook_commands, settings_file, table
from hookbus.harnesses.install.settings_file import Change, Entry
from hookbus.harnesses.install.table import InstallError as InstallError

Scope = Literal["user", "project", "local", "managed"]
Mode = Literal["command", "http"]

#: Claude Code's managed settings on Linux: deployed by an administrator for every user of the
#: machine, read before (and over) every other settings file.
MANAGED_SETTINGS = "/etc/claude-code/managed-settings.json"
#: The managed-settings key that makes Claude Code run managed hooks only.
MANAGED_HOOKS_ONLY = "allowManagedHooksOnly"
#: Gateway path of Claude Code's http hooks.
HTTP_PATH = "/v1/hooks/claude-code"
#: Default gateway address for ``--mode http``.
DEFAULT_GATEWAY_URL = "http://127.0.0.1:8787"
#: Timeout of a hook entry, in seconds (the command's deadline stays 0.5 s under it).
ENTRY_TIMEOUT_S = 10
#: Events a supervising agent may answer (a bidirectional wake waits up to 10 min).
SUPERVISED_TIMEOUT_S = 610
SUPERVISED_EVENTS = frozenset({"Stop", "SubagentStop", "PreCompact"})
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def installable_events(version: str | None = None) -> list[str]:
    """Every event the installer registers by default into a Claude Code of ``version``
    (None: not known, so none an older one may refuse), in the table's order."""
    return table.installable_events(ADAPTER, version)


def found_version() -> str | None:
    """The version of the ``claude`` on PATH, or None when none is there or it does not
    say (then events only newer versions send are left out)."""
    binary = shutil.which(ADAPTER.binary or "claude")
    return table.cli_version(binary) if binary else None


def settings_path(
    scope: Scope, *, home: Path | None = None, project: Path | None = None, root: Path | None = None
) -> Path:
    """The settings file of ``scope``: user (``~/.claude``), project or local (``./.claude``),
    managed (``/etc/claude-code``, under ``root`` when given)."""
    if scope == "managed":
        return table.rooted(MANAGED_SETTINGS, root)
    return table.home_path(SETTINGS[scope], home, project)


def hookbus_command() -> str:
    """How the settings should call hookbus: the console script next to this interpreter,
    else the one on PATH, else ``python -m hookbus``; quoted for a shell."""
    beside = Path(sys.executable).parent / "hookbus"
    if beside.is_file():
        return shlex.quote(str(beside))
    found = shutil.which("hookbus")
    if found:
        return shlex.quote(found)
    return f"{shlex.quote(sys.executable)} -m hookbus"


def entry_for(
    event: str, *, mode: Mode, command: str, url: str, token_env: str | None = None
) -> Entry:
    """The hook entry hookbus writes for ``event``. ``token_env`` (http mode) names the
    variable holding the gateway's bearer token: Claude Code interpolates it into the
    header at run time, so the settings file holds its name, never the token."""
    route = ADAPTER.route(event)
    timeout = hook_commands.entry_timeout(
        route, SUPERVISED_TIMEOUT_S if event in SUPERVISED_EVENTS else ENTRY_TIMEOUT_S
    )
    entry: Entry
    if mode == "http":
        # the gateway reads the entry's timeout from the query, as the command from --timeout
        entry = {
            "type": "http",
            "url": f"{hook_commands.gateway_endpoint(url, NAME)}?timeout={timeout}",
            "timeout": timeout,
        }
        if token_env:
            entry["headers"] = {"Authorization": f"Bearer ${{{token_env}}}"}
            entry["allowedEnvVars"] = [token_env]
    else:
        entry = {
            "type": "command",
            "command": f"{command} {NAME} hook --timeout {timeout}",
            "timeout": timeout,
        }
    if route.guard:
        entry["onFailure"] = "block"
    return entry


def is_ours(entry: Mapping[str, Any]) -> bool:
    """Whether a hook entry is one hookbus wrote (by what it calls)."""
    if entry.get("type") == "http":
        url = entry.get("url")
        return isinstance(url, str) and url.partition("?")[0].rstrip("/").endswith(HTTP_PATH)
    command = entry.get("command")
    return isinstance(command, str) and settings_file.command_calls(command, NAME)


def install(
    path: Path,
    *,
    mode: Mode = "command",
    events: Iterable[str] | None = None,
    url: str | None = None,
    command: str | None = None,
    token_env: str | None = None,
    managed_hooks_only: bool | None = None,
    cli_version: str | None = None,
    dry_run: bool = False,
) -> Change:
    """Merge hookbus's entries into ``path`` (the rules of :mod:`..install.settings_file`).

    ``managed_hooks_only`` sets ``allowManagedHooksOnly`` (managed settings: only managed
    hooks run); None leaves it as the administrator set it. ``cli_version``: the Claude
    Code the entries are for, which decides whether events newer versions added are
    written by default (``--events`` names them explicitly)."""
    if token_env is not None and (mode != "http" or not _ENV_NAME.match(token_env)):
        raise InstallError(
            "--token-env", "give an environment variable name (A-Z, 0-9, _), with --mode http"
        )
    hookbus = command or hookbus_command()

    def entry(event: str) -> Entry:
        if not ADAPTER.routes[event].install:
            raise InstallError(event, "a hook there must not run (hookbus never registers it)")
        return entry_for(
            event, mode=mode, command=hookbus, url=url or DEFAULT_GATEWAY_URL, token_env=token_env
        )

    wanted = table.wanted_entries(ADAPTER, events, "Claude Code", entry, cli_version)

    def edit(data: dict[str, Any]) -> tuple[list[str], list[str]]:
        if managed_hooks_only is not None:
            data[MANAGED_HOOKS_ONLY] = managed_hooks_only
        return settings_file.merge(data, wanted, is_ours)

    return settings_file.apply(path, edit, dry_run=dry_run)


def uninstall(path: Path, *, dry_run: bool = False) -> Change:
    """Remove exactly the entries hookbus wrote to ``path``."""
    return settings_file.apply_remove(path, is_ours, dry_run=dry_run)


def _path(scope: str, root: Path | None) -> Path:
    return settings_path(scope, root=root)  # type: ignore[arg-type]


def _install(
    path: Path,
    *,
    scope: str | None,
    dry_run: bool,
    root: Path | None = None,
    allow_managed_hooks_only: bool | None = None,
    **options: Any,
) -> table.Outcome:
    if allow_managed_hooks_only is not None and scope not in (None, "managed"):
        raise InstallError(
            "--allow-managed-hooks-only", "it is a managed setting: use it with --scope managed"
        )
    version = found_version() if options.get("events") is None else None
    change = install(
        path,
        managed_hooks_only=allow_managed_hooks_only,
        cli_version=version,
        dry_run=dry_run,
        **options,
    )
    return table.readable_when_managed(table.single(change), scope, dry_run)


INSTALLER = table.Installer(
    scopes={
        "user": SETTINGS["user"],
        "project": SETTINGS["project"],
        "local": SETTINGS["local"],
        "managed": MANAGED_SETTINGS,
    },
    settings_path=_path,
    install=_install,
    uninstall=table.file_uninstall(uninstall),
    entries=lambda path: table.json_entries(path, is_ours),
    file_kind="settings.json",
    options=(
        table.ExtraOption(
            "token_env",
            "--token-env",
            kind=str,
            help="http mode: the variable holding the gateway's bearer token (its name is "
            "written, never the token).",
        ),
        table.ExtraOption(
            "allow_managed_hooks_only",
            "--allow-managed-hooks-only/--no-allow-managed-hooks-only",
            kind=bool,
            help="--scope managed: set allowManagedHooksOnly (only managed hooks run); "
            "left as it is when not given.",
        ),
    ),
)
