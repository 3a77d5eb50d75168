"""The installer of a CLI whose ``settings.json`` has Claude Code's shape but which runs
command hooks only, with timeouts in milliseconds and no ``onFailure`` (Gemini CLI, Qwen
Code).

Each entry runs ``<hookbus> <cli> hook --timeout N`` (or, in ``http`` mode, a ``curl`` to the
gateway), and a guard's command ends with the shell fallback that prints the CLI's deny
(:mod:`hookbus.harnesses.install.hook_commands`): such a CLI lets the tool run when a hook
cannot start, fails or times out. The merge, backup, dry run and exact uninstall are
:mod:`hookbus.harnesses.install.settings_file`'s. Both CLIs' installers are the same but for
the adapter row, the CLI's name in messages and its deny, so they are one class.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from hookbus.harnesses.adapters import Adapter, Route
from hookbus.harnesses.install import hook_commands, settings_file, table
from hookbus.harnesses.install.claude_code import hookbus_command
from hookbus.harnesses.install.settings_file import Change, Entry

Mode = Literal["command", "http"]


@dataclass(frozen=True)
class CommandSettings:
    """The entries, install and uninstall of ``adapter``'s CLI; ``label`` names it in
    messages, ``down(route)`` is its deny when hookbus cannot run, ``timeout_s`` an entry's
    timeout in seconds (written in ms; the command's deadline stays under it)."""

    adapter: Adapter
    label: str
    down: Callable[[Route], Mapping[str, Any]]
    timeout_s: int

    def entry_for(
        self, event: str, *, command: str, mode: Mode = "command", url: str = ""
    ) -> Entry:
        """The hook entry hookbus writes for ``event`` (a request an operator may be asked
        about waits longer than ``approvals.wait_s``: its entry's timeout is above it)."""
        line, timeout = hook_commands.shell_entry(
            self.adapter.route(event),
            self.timeout_s,
            cli=self.adapter.name,
            mode=mode,
            command=command,
            url=url,
            down=self.down,
        )
        return {"type": "command", "command": line, "timeout": timeout * 1000}

    def is_ours(self, entry: Mapping[str, Any]) -> bool:
        """Whether a hook entry is one hookbus wrote (by what it calls)."""
        return hook_commands.entry_calls_hookbus(entry, "command", self.adapter.name)

    def install(
        self,
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
        wanted = table.wanted_entries(
            self.adapter,
            events,
            self.label,
            lambda event: self.entry_for(event, command=hookbus, mode=mode, url=url or ""),
        )
        return settings_file.apply_merge(path, wanted, self.is_ours, dry_run=dry_run)

    def uninstall(self, path: Path, *, dry_run: bool = False) -> Change:
        """Remove exactly the entries hookbus wrote to ``path``."""
        return settings_file.apply_remove(path, self.is_ours, dry_run=dry_run)
