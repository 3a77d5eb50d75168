"""``hookbus cline install`` / ``uninstall``: one hook file per event in Cline's hooks folder.

Cline has no hook settings to merge into: it runs every file named after an event
(``PreToolUse``, ``TaskStart``...; any case, no extension or one of its script extensions)
in each hooks folder (``~/.cline/hooks/``, a project's ``.clinerules/hooks/``), through the
file's ``#!`` interpreter. So the installer writes one small ``/bin/sh`` script per event,
named after it, that runs ``<hookbus> cline hook --timeout N`` (or, in ``http`` mode, a
``curl`` to the gateway); a guard's ends with ``|| printf '\\nHOOK_CONTROL\\t%s\\n'
'<refusal JSON>'``: Cline ignores the exit code and lets the call run when a hook crashes or
prints no JSON, so the script prints the refusal itself whenever hookbus did not answer with
exit 0, as the ``HOOK_CONTROL`` line Cline reads in preference to anything printed before it
(on a line of its own: half a JSON printed before would otherwise spoil it). ``N`` stays
far under the 120 s after which Cline kills a hook and runs the call.

A file is hookbus's when it holds :data:`MARKER`; ``uninstall`` removes exactly those (and
the folder, when that leaves it empty). A file of the user's with an event's name is never
overwritten: the install is refused, saying which file and what to do. Writes are atomic
(temporary file + rename); ``--dry-run`` shows the files as a diff and writes nothing.
"""

from __future__ import annotations

import json
import os
import shlex
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from hookbus.harnesses.adapters import Route
from hookbus.harnesses.cline_adapter import ADAPTER, NAME, SETTINGS
from hookbus.harnesses.install import hook_commands, table
from hookbus.harnesses.install.claude_code import hookbus_command
from hookbus.harnesses.install.settings_file import Change
from hookbus.harnesses.install.table import InstallError

Mode = Literal["command", "http"]

#: The deadline a hook file gives hookbus, in seconds: Cline kills a hook after 120 s and
#: then runs the call, so the answer (an operator's included) must come well before.
ENTRY_TIMEOUT_S = 100
#: The line that marks a hook file as hookbus's.
MARKER = "# hookbus: written by `hookbus cline install`; `hookbus cline uninstall` removes it"
#: What starts the line Cline reads as a hook's answer when its stdout has several.
CONTROL_PREFIX = "HOOK_CONTROL"
#: Mode of a hook file: Cline runs it through its ``#!`` line, the mode is for people.
FILE_MODE = 0o755


def installable_events() -> list[str]:
    """Every event the installer registers by default, in the table's order."""
    return table.installable_events(ADAPTER)


def settings_path(scope: str, *, home: Path | None = None, project: Path | None = None) -> Path:
    """The hooks folder of ``scope``: user (``$CLINE_DIR/hooks``, else ``~/.cline/hooks``,
    where Cline looks) or project (``./.clinerules/hooks``)."""
    cline_dir = os.environ.get("CLINE_DIR", "").strip()
    if scope == "user" and home is None and cline_dir:
        return Path(cline_dir) / "hooks"
    return table.home_path(SETTINGS[scope], home, project)


def _down(route: Route) -> dict[str, Any]:
    return hook_commands.unavailable_output(ADAPTER, route)


def hook_line(event: str, *, command: str, mode: Mode = "command", url: str = "") -> str:
    """The command line of ``event``'s hook file (a guard's with its refusal fallback)."""
    route = ADAPTER.route(event)
    if mode == "http":
        gateway = url or hook_commands.DEFAULT_GATEWAY_URL
        line = hook_commands.gateway_command(gateway, NAME, ENTRY_TIMEOUT_S)
    else:
        line = hook_commands.hook_command(command, NAME, ENTRY_TIMEOUT_S)
    if route.guard:
        # the refusal as Cline's ``HOOK_CONTROL`` line, which it reads in preference to
        # anything hookbus printed before it failed (on a line of its own: what came before
        # may not end with one)
        refusal = shlex.quote(json.dumps(_down(route)))
        return f"{line} || printf '\\n{CONTROL_PREFIX}\\t%s\\n' {refusal}"
    if mode == "http":
        return hook_commands.passes_on_failure(line)
    return line


def file_text(event: str, line: str) -> str:
    """The whole hook file of ``event`` that runs ``line``."""
    why = (
        "# Cline runs the call when a hook fails or prints no JSON: the fallback refuses it."
        if ADAPTER.route(event).guard
        else "# This event is published to the fleet; the hook answers nothing."
    )
    head = f"# Cline's {event} hook, answered by the hookbus fleet."
    return f"#!/bin/sh\n{MARKER}\n{head}\n{why}\n{line}\n"


def is_ours(text: str) -> bool:
    """Whether a hook file's text is one hookbus wrote."""
    return MARKER in text.splitlines()


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def ours(folder: Path) -> dict[str, str]:
    """hookbus's hook files in ``folder``: file name -> text."""
    if not folder.is_dir():
        return {}
    found = {}
    for path in sorted(folder.iterdir()):
        text = _read(path) if path.is_file() else None
        if text is not None and is_ours(text):
            found[path.name] = text
    return found


def _listing(files: Mapping[str, str]) -> str | None:
    """The files as one text (for the change's diff); None when there are none."""
    if not files:
        return None
    return "".join(f"==> {name} <==\n{text}" for name, text in sorted(files.items()))


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            os.fchmod(fh.fileno(), FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _apply(folder: Path, after: Mapping[str, str], dry_run: bool) -> Change:
    """Make hookbus's files in ``folder`` exactly ``after`` (name -> text)."""
    before = ours(folder)
    added = [name for name, text in after.items() if before.get(name) != text]
    removed = [name for name in before if name not in after]
    listed = _listing(before)
    if listed is None and not after:
        listed = ""  # nothing of hookbus's before or after: no change
    change = Change(folder, listed, _listing(after) or "", tuple(added), tuple(removed))
    if dry_run or not change.changed:
        return change
    for name in added:
        _write(folder / name, after[name])
    for name in removed:
        (folder / name).unlink(missing_ok=True)
    if not after and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()  # the folder held nothing but hookbus's files
    return change


def install(
    path: Path,
    *,
    events: Iterable[str] | None = None,
    command: str | None = None,
    mode: Mode = "command",
    url: str | None = None,
    dry_run: bool = False,
) -> Change:
    """Write hookbus's hook file of each event into the hooks folder ``path`` (and remove
    its files of events no longer wanted); InstallError where a file of the user's has an
    event's name."""
    hookbus = command or hookbus_command()
    wanted = table.wanted_entries(
        ADAPTER,
        events,
        "Cline",
        lambda event: {
            "text": file_text(event, hook_line(event, command=hookbus, mode=mode, url=url or ""))
        },
    )
    for event in wanted:
        target = path / event
        text = _read(target) if target.exists() else None
        if target.exists() and (text is None or not is_ours(text)):
            raise InstallError(
                event,
                f"{target} is a hook file of your own, which hookbus does not overwrite; "
                f"rename it (Cline also runs {event}.sh, {event}.py...) and install again",
            )
    return _apply(path, {event: entry["text"] for event, entry in wanted.items()}, dry_run)


def uninstall(path: Path, *, dry_run: bool = False) -> Change:
    """Remove exactly hookbus's hook files from the hooks folder ``path``."""
    return _apply(path, {}, dry_run)


def entries(path: Path) -> list[tuple[str, Mapping[str, Any]]]:
    """hookbus's hook files in ``path`` as (event, entry) pairs, the entry's ``command``
    the line that runs hookbus (``hookbus doctor``)."""
    found: list[tuple[str, Mapping[str, Any]]] = []
    for name, text in ours(path).items():
        lines = [line for line in text.splitlines() if line and not line.startswith("#")]
        found.append((name, {"command": lines[-1] if lines else "", "file": str(path / name)}))
    return found


INSTALLER = table.file_installer(
    scopes={"user": f"$CLINE_DIR/hooks, else {SETTINGS['user']}", "project": SETTINGS["project"]},
    settings_path=lambda scope, root: settings_path(scope),
    install=install,
    uninstall=uninstall,
    entries=entries,
    file_kind="hooks folder",
)
