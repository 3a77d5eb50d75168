"""``hookbus gemini-cli``: the per-event hook command, and its settings.json installer.

``hook`` itself runs on the lean path (:mod:`hookbus.harnesses.gemini_adapter`, dispatched by
:mod:`hookbus.cli` before typer loads); it is declared here too so that ``--help`` shows it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hookbus.cli.support import print_json, state, want_json

app = typer.Typer(
    help="Gemini CLI on the fleet: the hook command and its settings.json installer.",
    no_args_is_help=True,
)

ScopeOption = Annotated[
    str,
    typer.Option(
        "--scope", help="user (~/.gemini/settings.json) or project (.gemini/settings.json)."
    ),
]
SettingsOption = Annotated[
    Path | None,
    typer.Option("--settings", help="The file to edit (overrides --scope)."),
]
DryRunOption = Annotated[bool, typer.Option("--dry-run", help="Print the change; write nothing.")]
JsonOption = Annotated[bool, typer.Option("--json", help="JSON output.")]


@app.command("hook")
def hook(
    ctx: typer.Context,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout", help="The hook entry's timeout in s; the deadline stays under it."
        ),
    ] = 60.0,
) -> None:
    """Answer one Gemini CLI hook event: its JSON on stdin, Gemini CLI's answer on stdout.

    Observe-only events are published and the command returns at once; blocking ones wait
    for the fleet's decision. When the bus cannot answer, guards deny and the rest pass.
    """
    from hookbus.harnesses.gemini_adapter import gemini_cli

    cli = state(ctx)
    options = dict(cli.overrides, config=cli.config_file)
    code = gemini_cli(["--timeout", str(timeout)], options)
    raise typer.Exit(code or 0)


def _target(scope: str, settings: Path | None) -> Path:
    from hookbus.harnesses.gemini_install import settings_path

    if settings is not None:
        return settings
    if scope not in ("user", "project"):
        raise typer.BadParameter("must be user or project", param_hint="--scope")
    return settings_path(scope)  # type: ignore[arg-type]


def _report(ctx: typer.Context, change: object, json_flag: bool, dry_run: bool, verb: str) -> None:
    from hookbus.harnesses.installer import Change

    assert isinstance(change, Change)
    if want_json(ctx, json_flag):
        print_json(
            {
                "settings": str(change.path),
                "changed": change.changed,
                "written": change.changed and not dry_run,
                "added": list(change.added),
                "removed": list(change.removed),
                "diff": change.diff(),
            }
        )
        return
    if not change.changed:
        typer.echo(f"{change.path}: already {verb}; nothing to change")
        return
    typer.echo(change.diff(), nl=False)
    if dry_run:
        typer.echo(f"(dry run: {change.path} not written)")
    else:
        typer.echo(
            f"wrote {change.path} (backup of the old file: {change.path.name}.hookbus-backup)"
        )


@app.command("install")
def install(
    ctx: typer.Context,
    scope: ScopeOption = "user",
    settings: SettingsOption = None,
    mode: Annotated[
        str,
        typer.Option(
            "--mode", help="command (a process per event) or http (a curl to the gateway)."
        ),
    ] = "command",
    url: Annotated[
        str | None,
        typer.Option(
            "--url", help="The gateway's address in http mode (default http://127.0.0.1:8787)."
        ),
    ] = None,
    events: Annotated[
        list[str] | None,
        typer.Option("--events", help="Only these events (repeat the option); default: all."),
    ] = None,
    command: Annotated[
        str | None,
        typer.Option(
            "--command", help="How the entries call hookbus (default: this install's path)."
        ),
    ] = None,
    dry_run: DryRunOption = False,
    json_flag: JsonOption = False,
) -> None:
    """Merge hookbus's hook entries into a Gemini CLI settings file (idempotent)."""
    from hookbus.harnesses.gemini_install import install as do_install

    if mode not in ("command", "http"):
        raise typer.BadParameter("must be command or http", param_hint="--mode")
    if url is not None and mode != "http":
        raise typer.BadParameter("only with --mode http", param_hint="--url")
    chosen = [e for item in events or [] for e in item.split(",") if e] or None
    change = do_install(
        _target(scope, settings),
        events=chosen,
        command=command,
        mode=mode,  # type: ignore[arg-type]
        url=url,
        dry_run=dry_run,
    )
    _report(ctx, change, json_flag, dry_run, "installed")


@app.command("uninstall")
def uninstall(
    ctx: typer.Context,
    scope: ScopeOption = "user",
    settings: SettingsOption = None,
    dry_run: DryRunOption = False,
    json_flag: JsonOption = False,
) -> None:
    """Remove exactly the hook entries hookbus added; everything else stays."""
    from hookbus.harnesses.gemini_install import uninstall as do_uninstall

    change = do_uninstall(_target(scope, settings), dry_run=dry_run)
    _report(ctx, change, json_flag, dry_run, "uninstalled")
