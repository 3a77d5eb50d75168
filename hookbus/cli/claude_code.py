"""``hookbus claude-code``: the per-event hook command, and its settings.json installer.

``hook`` itself runs on the lean path (:mod:`hookbus.harnesses.hook`, dispatched by
:mod:`hookbus.cli` before typer loads); it is declared here too so that ``--help`` shows it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hookbus.cli.support import print_json, state, want_json

app = typer.Typer(
    help="Claude Code on the fleet: the hook command and its settings.json installer.",
    no_args_is_help=True,
)

ScopeOption = Annotated[
    str,
    typer.Option(
        "--scope",
        help="user (~/.claude/settings.json), project (.claude/settings.json) or local "
        "(.claude/settings.local.json).",
    ),
]
SettingsOption = Annotated[
    Path | None,
    typer.Option("--settings", help="The settings file to edit (overrides --scope)."),
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
    """Answer one Claude Code hook event: its JSON on stdin, Claude Code's answer on stdout.

    Observe-only events are published and the command returns at once; blocking ones
    (PreToolUse, PermissionRequest, UserPromptSubmit, Stop, PreCompact, ...) wait for the
    fleet's decision. When the bus cannot answer, guards deny and everything else passes.
    """
    from hookbus.harnesses.hook import lean_command

    cli = state(ctx)
    options = dict(cli.overrides, config=cli.config_file)
    code = lean_command("claude-code", ["--timeout", str(timeout)], options)
    raise typer.Exit(code or 0)


def _target(scope: str, settings: Path | None) -> Path:
    from hookbus.harnesses.claude_code_install import settings_path

    if settings is not None:
        return settings
    if scope not in ("user", "project", "local"):
        raise typer.BadParameter("must be user, project or local", param_hint="--scope")
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
        typer.Option("--mode", help="command (a process per event) or http (the gateway)."),
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
            "--command", help="How the settings call hookbus (default: this install's path)."
        ),
    ] = None,
    token_env: Annotated[
        str | None,
        typer.Option(
            "--token-env",
            help="http mode: the variable holding the gateway's bearer token (its name is "
            "written, never the token).",
        ),
    ] = None,
    dry_run: DryRunOption = False,
    json_flag: JsonOption = False,
) -> None:
    """Merge hookbus's hook entries into a Claude Code settings file (idempotent)."""
    from hookbus.harnesses.claude_code_install import install as do_install

    if mode not in ("command", "http"):
        raise typer.BadParameter("must be command or http", param_hint="--mode")
    if url is not None and mode != "http":
        raise typer.BadParameter("only with --mode http", param_hint="--url")
    chosen = [e for item in events or [] for e in item.split(",") if e] or None
    change = do_install(
        _target(scope, settings),
        mode=mode,  # type: ignore[arg-type]
        events=chosen,
        url=url,
        command=command,
        token_env=token_env,
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
    from hookbus.harnesses.claude_code_install import uninstall as do_uninstall

    change = do_uninstall(_target(scope, settings), dry_run=dry_run)
    _report(ctx, change, json_flag, dry_run, "uninstalled")
