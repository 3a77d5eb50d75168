"""What the ``claude-code``, ``gemini-cli`` and ``codex`` command groups share.

Each group has the same three commands (``hook``, ``install``, ``uninstall``) over its own
adapter and installer; the options, the checks of ``--scope`` / ``--mode`` / ``--events``,
running the lean hook command under typer, and printing an installer's change live here once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from hookbus.cli.support import print_json, state, want_json

SettingsOption = Annotated[
    Path | None,
    typer.Option("--settings", help="The file to edit (overrides --scope)."),
]
DryRunOption = Annotated[bool, typer.Option("--dry-run", help="Print the change; write nothing.")]
JsonOption = Annotated[bool, typer.Option("--json", help="JSON output.")]
TimeoutOption = Annotated[
    float,
    typer.Option("--timeout", help="The hook entry's timeout in s; the deadline stays under it."),
]
ModeOption = Annotated[
    str,
    typer.Option("--mode", help="command (a process per event) or http (the gateway)."),
]
UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url", help="The gateway's address in http mode (default http://127.0.0.1:8787)."
    ),
]
EventsOption = Annotated[
    list[str] | None,
    typer.Option("--events", help="Only these events (repeat the option); default: all."),
]
CommandOption = Annotated[
    str | None,
    typer.Option("--command", help="How the entries call hookbus (default: this install's path)."),
]


def run_hook(
    ctx: typer.Context, answer: Callable[[list[str], dict[str, Any]], int | None], timeout: float
) -> None:
    """Run an adapter's lean hook command with the global options typer parsed."""
    cli = state(ctx)
    options = dict(cli.overrides, config=cli.config_file)
    code = answer(["--timeout", str(timeout)], options)
    raise typer.Exit(code or 0)


def target(
    scope: str, settings: Path | None, scopes: Sequence[str], settings_path: Callable[[Any], Path]
) -> Path:
    """The file an install edits: ``--settings``, else the scope's file."""
    if settings is not None:
        return settings
    if scope not in scopes:
        raise typer.BadParameter("must be " + " or ".join(scopes), param_hint="--scope")
    return settings_path(scope)


def install_choices(mode: str, url: str | None, events: Iterable[str] | None) -> list[str] | None:
    """Check ``--mode`` / ``--url`` and split ``--events`` (repeated or comma-separated)."""
    if mode not in ("command", "http"):
        raise typer.BadParameter("must be command or http", param_hint="--mode")
    if url is not None and mode != "http":
        raise typer.BadParameter("only with --mode http", param_hint="--url")
    return [e for item in events or [] for e in item.split(",") if e] or None


def report(
    ctx: typer.Context,
    changes: Sequence[Any],
    json_flag: bool,
    dry_run: bool,
    verb: str,
    extra: dict[str, Any] | None = None,
) -> None:
    """Print what an install or uninstall changed: the diff of each file, or JSON."""
    main = changes[0]
    if want_json(ctx, json_flag):
        print_json(
            {
                "settings": str(main.path),
                **(extra or {}),
                "changed": any(c.changed for c in changes),
                "written": any(c.changed for c in changes) and not dry_run,
                "added": list(main.added),
                "removed": list(main.removed),
                "diff": "".join(c.diff() for c in changes),
            }
        )
        return
    for change in changes:
        if not change.changed:
            typer.echo(f"{change.path}: already {verb}; nothing to change")
            continue
        typer.echo(change.diff(), nl=False)
        if dry_run:
            typer.echo(f"(dry run: {change.path} not written)")
        else:
            typer.echo(
                f"wrote {change.path} (backup of the old file: {change.path.name}.hookbus-backup)"
            )
