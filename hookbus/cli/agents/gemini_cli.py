"""``hookbus gemini-cli``: the per-event hook command, and its settings.json installer.

``hook`` itself runs on the lean path (:mod:`hookbus.harnesses.gemini_adapter`, dispatched by
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
    help="Gemini CLI on the fleet: the hook command and its settings.json installer.",
    no_args_is_help=True,
)

SCOPES = ("user", "project")
ScopeOption = Annotated[
    str,
    typer.Option(
        "--scope", help="user (~/.gemini/settings.json) or project (.gemini/settings.json)."
    ),
]


@app.command("hook")
def hook(ctx: typer.Context, timeout: TimeoutOption = 60.0) -> None:
    """Answer one Gemini CLI hook event: its JSON on stdin, Gemini CLI's answer on stdout.

    Observe-only events are published and the command returns at once; blocking ones wait
    for the fleet's decision. When the bus cannot answer, guards deny and the rest pass.
    """
    from hookbus.harnesses.gemini_adapter import gemini_cli

    run_hook(ctx, gemini_cli, timeout)


def _target(scope: str, settings: Path | None) -> Path:
    from hookbus.harnesses.install.gemini_cli import settings_path

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
    dry_run: DryRunOption = False,
    json_flag: JsonOption = False,
) -> None:
    """Merge hookbus's hook entries into a Gemini CLI settings file (idempotent)."""
    from hookbus.harnesses.install.gemini_cli import install as do_install

    chosen = install_choices(mode, url, events)
    change = do_install(
        _target(scope, settings),
        events=chosen,
        command=command,
        mode=mode,  # type: ignore[arg-type]
        url=url,
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
    from hookbus.harnesses.install.gemini_cli import uninstall as do_uninstall

    change = do_uninstall(_target(scope, settings), dry_run=dry_run)
    report(ctx, [change], json_flag, dry_run, "uninstalled")
