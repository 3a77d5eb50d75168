"""What an agent CLI's installer provides, so the command groups can be generated from rows.

Each installer module (named by its adapter row's ``installer``) defines ``INSTALLER``, an
:class:`Installer`: its scopes and where each writes, the ``install`` / ``uninstall`` calls
with the options every installer takes (``--mode``, ``--url``, ``--events``, ``--command``,
``--dry-run``), and the options of its own (:class:`ExtraOption`: Claude Code's
``--token-env``, Codex's ``--trust-file``). :mod:`hookbus.cli.agents.groups` turns that into
``hookbus <cli> install|uninstall`` with typer; nothing here imports typer. An installer
that edits one file writes only its ``install`` / ``uninstall`` of that file and gets the
calls of its row from :func:`file_installer` (or :func:`file_install` / :func:`file_uninstall`
where it has options of its own).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hookbus.errors import HookBusError
from hookbus.harnesses.adapters import Adapter
from hookbus.harnesses.install.settings_file import Change, Entry, read_settings

#: Scope of the files an administrator deploys for every user of a machine.
MANAGED = "managed"
#: Mode of a managed file hookbus creates: root writes it, every user's CLI must read it (a
#: file nobody else can read leaves their sessions without the guards).
MANAGED_FILE_MODE = 0o644


class InstallError(HookBusError):
    """An install request that cannot be honoured: an unknown event, one hookbus must never
    register on, or an option that does not fit (``event`` names it)."""

    def __init__(self, event: str, reason: str) -> None:
        super().__init__(f"cannot install on {event!r}: {reason}")
        self.event = event


class ExtraOption:
    """An option one installer has beyond the common ones.

    ``name`` is the keyword the installer's calls take, ``flag`` the command-line spelling,
    ``kind`` one of ``str``, ``Path`` or ``bool``, ``commands`` the commands that offer it."""

    __slots__ = ("commands", "flag", "help", "kind", "name")

    def __init__(
        self,
        name: str,
        flag: str,
        *,
        kind: type,
        help: str,
        commands: Sequence[str] = ("install",),
    ) -> None:
        if kind not in (str, Path, bool):
            raise ValueError(f"option {flag}: kind must be str, Path or bool")
        self.name = name
        self.flag = flag
        self.kind = kind
        self.help = help
        self.commands = tuple(commands)


class Outcome:
    """What an install or uninstall changed: each file's change (the main one first) and
    fields the command's ``--json`` output adds (Codex's ``trust_file``)."""

    __slots__ = ("changes", "extra")

    def __init__(self, changes: Sequence[Change], extra: Mapping[str, str] | None = None) -> None:
        self.changes = tuple(changes)
        self.extra = dict(extra or {})


#: ``install(path, scope=..., root=..., mode=..., events=..., url=..., command=...,
#: dry_run=..., **extras)``; ``scope`` is None when the user named the file with
#: ``--settings``, ``root`` a folder standing in for ``/`` (managed scope).
InstallCall = Callable[..., Outcome]
#: ``uninstall(path, scope=..., root=..., dry_run=..., **extras)``.
UninstallCall = Callable[..., Outcome]
#: ``install(path, mode=..., events=..., url=..., command=..., dry_run=..., **extras)`` of
#: an installer that edits one file: the change it made (or, dry, would make).
FileInstallCall = Callable[..., Change]
#: ``uninstall(path, dry_run=...)`` of an installer that edits one file.
FileUninstallCall = Callable[..., Change]
#: The hook entries hookbus wrote to a file: (event, entry) pairs (``hookbus doctor``).
EntriesCall = Callable[[Path], list[tuple[str, Mapping[str, Any]]]]
#: The events whose hookbus entries the CLI would skip as untrusted in a file of a scope.
UntrustedCall = Callable[[Path, str], list[str]]
#: Why the CLI would skip hookbus's file at a path without a word (None: it would not),
#: given the PATH its runtime is found on (a plugin that does not load).
LoadProblemCall = Callable[[Path, str], str | None]


class Installer:
    """One agent CLI's installer as the generated commands call it.

    ``scopes`` maps each scope to the file it edits, in words for ``--help``;
    ``settings_path(scope, root)`` gives that file (``root``: a folder standing in for
    ``/`` when trying the managed scope without root)."""

    __slots__ = (
        "entries",
        "file_kind",
        "install",
        "load_problem",
        "options",
        "scopes",
        "settings_path",
        "uninstall",
        "untrusted",
    )

    def __init__(
        self,
        *,
        scopes: Mapping[str, str],
        settings_path: Callable[[str, Path | None], Path],
        install: InstallCall,
        uninstall: UninstallCall,
        file_kind: str,
        entries: EntriesCall,
        options: Sequence[ExtraOption] = (),
        untrusted: UntrustedCall | None = None,
        load_problem: LoadProblemCall | None = None,
    ) -> None:
        self.scopes = dict(scopes)
        self.settings_path = settings_path
        self.install = install
        self.uninstall = uninstall
        self.file_kind = file_kind
        self.entries = entries
        self.options = tuple(options)
        self.untrusted = untrusted
        self.load_problem = load_problem

    def scope_help(self) -> str:
        """``user (~/.x/settings.json), project (...) or managed (...)``."""
        parts = [f"{scope} ({where})" for scope, where in self.scopes.items()]
        if len(parts) == 1:
            return parts[0] + "."
        return ", ".join(parts[:-1]) + " or " + parts[-1] + "."

    def options_for(self, command: str) -> tuple[ExtraOption, ...]:
        return tuple(o for o in self.options if command in o.commands)


def home_path(template: str, home: Path | None, project: Path | None) -> Path:
    """A settings template (``~/.x/y.json`` or a project-relative ``.x/y.json``) as a path."""
    if template.startswith("~/"):
        return (home or Path.home()) / template[2:]
    return (project or Path.cwd()) / template


def rooted(path: str, root: Path | None) -> Path:
    """An absolute system path (``/etc/...``), under ``root`` when one is given."""
    if root is None:
        return Path(path)
    return root / path.lstrip("/")


def readable_when_managed(outcome: Outcome, scope: str | None, dry_run: bool) -> Outcome:
    """Give a managed file this install created :data:`MANAGED_FILE_MODE` (a file that
    existed keeps its mode)."""
    if scope == MANAGED and not dry_run:
        for change in outcome.changes:
            if change.before is None and change.changed and change.path.exists():
                os.chmod(change.path, MANAGED_FILE_MODE)
    return outcome


def json_entries(
    path: Path, is_ours: Callable[[Mapping[str, Any]], bool]
) -> list[tuple[str, Mapping[str, Any]]]:
    """hookbus's entries in a settings.json of Claude Code's shape (matcher groups)."""
    _, data = read_settings(path)
    return [
        (event, entry)
        for event, groups in data.get("hooks", {}).items()
        for group in groups
        for entry in group.get("hooks", [])
        if isinstance(entry, dict) and is_ours(entry)
    ]


def single(change: Any, extra: Mapping[str, str] | None = None) -> Outcome:
    """The outcome of an installer that edits one file."""
    return Outcome([change], extra)


def installable_events(adapter: Adapter, version: str | None = None) -> list[str]:
    """Every event of ``adapter`` its installer registers by default, in the table's order:
    an event a newer CLI added (its route's ``since``) only when ``version`` (the CLI's, if
    known) is that one or newer."""
    return [
        name
        for name, route in adapter.routes.items()
        if route.install and (route.since is None or _at_least(version, route.since))
    ]


def _at_least(version: str | None, since: str) -> bool:
    have, need = version_tuple(version or ""), version_tuple(since)
    return have is not None and need is not None and have >= need


def wanted_entries(
    adapter: Adapter,
    events: Iterable[str] | None,
    label: str,
    entry: Callable[[str], Entry],
    version: str | None = None,
) -> dict[str, Entry]:
    """``entry(event)`` of each event to install (``None``: every installable one into a CLI
    of ``version``), checked one by one in the order given; InstallError for a name that is
    not one of the CLI's events (``label``: the CLI's name in the message)."""
    wanted: dict[str, Entry] = {}
    chosen = installable_events(adapter, version) if events is None else events
    for event in chosen:
        if event not in adapter.routes:
            known = ", ".join(n for n, route in adapter.routes.items() if route.install)
            raise InstallError(event, f"not a {label} event; choose from {known}")
        wanted[event] = entry(event)
    return wanted


def file_install(install: FileInstallCall) -> InstallCall:
    """The :data:`InstallCall` of an installer that edits one file: its ``install`` with the
    common options and its extras; a managed file it creates is made readable to all."""

    def call(
        path: Path, *, scope: str | None, dry_run: bool, root: Path | None = None, **options: Any
    ) -> Outcome:
        change = install(path, dry_run=dry_run, **options)
        return readable_when_managed(single(change), scope, dry_run)

    return call


def file_uninstall(uninstall: FileUninstallCall) -> UninstallCall:
    """The :data:`UninstallCall` of an installer that edits one file."""

    def call(path: Path, *, scope: str | None, dry_run: bool, root: Path | None = None) -> Outcome:
        return single(uninstall(path, dry_run=dry_run))

    return call


def file_installer(
    *,
    scopes: Mapping[str, str],
    settings_path: Callable[[str, Path | None], Path],
    install: FileInstallCall,
    uninstall: FileUninstallCall,
    entries: EntriesCall,
    file_kind: str = "settings.json",
) -> Installer:
    """The row of a CLI whose installer edits one file and takes only the common options."""
    return Installer(
        scopes=scopes,
        settings_path=settings_path,
        install=file_install(install),
        uninstall=file_uninstall(uninstall),
        file_kind=file_kind,
        entries=entries,
    )


#: Seconds a CLI's ``--version`` may take.
VERSION_TIMEOUT_S = 15.0
#: The x.y.z a CLI's ``--version`` prints.
VERSION_PATTERN = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def cli_version(binary: str) -> str | None:
    """``<binary> --version``'s x.y.z, or None when it does not say."""
    try:
        done = subprocess.run(
            [binary, "--version"],
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = VERSION_PATTERN.search(done.stdout + " " + done.stderr)
    return found[0] if found else None


def version_tuple(text: str) -> tuple[int, int, int] | None:
    """The first x.y.z in ``text`` as numbers (``"2.1.332 (Claude Code)"``), or None."""
    found = VERSION_PATTERN.search(text)
    return (int(found[1]), int(found[2]), int(found[3])) if found else None
