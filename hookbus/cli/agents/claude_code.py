"""``hookbus claude-code``: the per-event hook command, and its settings.json installer.

``hook`` itself runs on the lean path (:mod:`hookbus.harnesses.lean.hook`, dispatched by
:mod:`hookbus.cli` before typer loads); it is declared here too so that ``--help`` shows it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hookbus.cli.agents.options import (
    CommandOption,
    DryRunOption,
    EventsOption,
    JsonOption,
    ModeOption,
    SettingsOption,
    TimeoutOption,
    UrlOption,
    install_choices,
    report,
    run_hook,
    target,
)

app = typer.Typer(
    help="Claude Code on the fleet: the hook command and its settings.json installer.",
    no_args_is_help=True,
)

SCOPES = ("user", "project", "local")
ScopeOption = Annotated[
    str,
    typer.Option(
        "--scope",
        help="user (~/.claude/settings.json), project (.claude/settings.json) or local "
        "(.claude/settings.local.json).",
    ),
]


@app.command("hook")
def hook(ctx: typer.Context, timeout: TimeoutOption = 60.0) -> None:
    """Answer one Claude Code hook event: its JSON on stdin, Claude Code's answer on stdout.

    Observe-only events are published and the command returns at once; blocking ones
    (PreToolUse, PermissionRequest, UserPromptSubmit, Stop, PreCompact, ...) wait for the
    fleet's decision. When the bus cannot answer, guards deny and everything else passes.
    """
    from hookbus.harnesses.lean.hook import lean_command

    run_hook(ctx, lambda argv, options: lean_command("claude-code", argv, options), timeout)


def _target(scope: str, settings: Path | None) -> Path:
    from hookbus.harnesses.install.claude_code import settings_path

    return target(scope, settings, SCOPES, settings_path)


@app.command("install")
def install(
    ctx: typer.Context,
    scope: ScopeOption = "user",
    settings: SettingsOption = None,
    mode: ModeOption = "command",
    url: UrlOption = None,
    events: EventsOption = None,
    command: CommandOption = None,
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
    from hookbus.harnesses.install.claude_code import install as do_install

    chosen = install_choices(mode, url, events)
    change = do_install(
        _target(scope, settings),
        mode=mode,  # type: ignore[arg-type]
        events=chosen,
        url=url,
        command=command,
        token_env=token_env,
        dry_run=dry_run,
    )
    report(ctx, [change], json_flag, dry_run, "installed")


@app.command("uninstall")
def uninstall(
    ctx: typer.Context,
    scope: ScopeOption = "user",
    settings: SettingsOption = None,
    dry_run: DryRunOption = False,
    json_flag: JsonOption = False,
) -> None:
    """Remove exactly the hook entries hookbus added; everything else stays."""
    from hookbus.harnesses.install.claude_code import uninstall as do_uninstall

    change = do_uninstall(_target(scope, settings), dry_run=dry_run)
    report(ctx, [change], json_flag, dry_run, "uninstalled")
