"""``hookbus codex``: the per-event hook command, and its config.toml installer.

``hook`` itself runs on the lean path (:mod:`hookbus.harnesses.codex_adapter`, dispatched by
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
    help="Codex on the fleet: the hook command and its config.toml installer.",
    no_args_is_help=True,
)

SCOPES = ("user", "project")
ScopeOption = Annotated[
    str,
    typer.Option(
        "--scope",
        help="user ($CODEX_HOME/config.toml, else ~/.codex/config.toml) or project "
        "(.codex/config.toml).",
    ),
]
TrustFileOption = Annotated[
    Path | None,
    typer.Option(
        "--trust-file",
        help="The config.toml that gets the trust records (default: the user's for "
        "--scope project, else the edited file itself).",
    ),
]


@app.command("hook")
def hook(ctx: typer.Context, timeout: TimeoutOption = 60.0) -> None:
    """Answer one Codex hook event: its JSON on stdin, Codex's answer on stdout.

    Observe-only events are published and the command returns at once; blocking ones wait
    for the fleet's decision. When the bus cannot answer, guards deny and the rest pass.
    """
    from hookbus.harnesses.codex_adapter import codex

    run_hook(ctx, codex, timeout)


def _target(scope: str, settings: Path | None) -> Path:
    from hookbus.harnesses.install.codex import settings_path

    return target(scope, settings, SCOPES, settings_path)


def _trust_file(scope: str, settings: Path | None, trust_file: Path | None) -> Path | None:
    """Codex reads trust records from the user's config only: a project's hooks are
    trusted there; a user config (or an explicit --settings) holds its own."""
    from hookbus.harnesses.install.codex import settings_path

    if trust_file is not None:
        return trust_file
    if settings is None and scope == "project":
        return settings_path("user")
    return None


def _report(ctx: typer.Context, changes: object, json_flag: bool, dry_run: bool, verb: str) -> None:
    from hookbus.harnesses.install.codex import Changes

    assert isinstance(changes, Changes)
    trust = changes.trust.path if changes.trust else changes.path
    report(ctx, changes.all, json_flag, dry_run, verb, extra={"trust_file": str(trust)})


@app.command("install")
def install(
    ctx: typer.Context,
    scope: ScopeOption = "user",
    settings: SettingsOption = None,
    mode: ModeOption = "command",
    url: UrlOption = None,
    events: EventsOption = None,
    command: CommandOption = None,
    trust_file: TrustFileOption = None,
    dry_run: DryRunOption = False,
    json_flag: JsonOption = False,
) -> None:
    """Add hookbus's hook entries to a Codex config.toml, recorded as trusted (idempotent)."""
    from hookbus.harnesses.install.codex import install as do_install

    chosen = install_choices(mode, url, events)
    change = do_install(
        _target(scope, settings),
        events=chosen,
        command=command,
        mode=mode,  # type: ignore[arg-type]
        url=url,
        trust_file=_trust_file(scope, settings, trust_file),
        dry_run=dry_run,
    )
    _report(ctx, change, json_flag, dry_run, "installed")


@app.command("uninstall")
def uninstall(
    ctx: typer.Context,
    scope: ScopeOption = "user",
    settings: SettingsOption = None,
    trust_file: TrustFileOption = None,
    dry_run: DryRunOption = False,
    json_flag: JsonOption = False,
) -> None:
    """Remove exactly the hook entries hookbus added (and their trust records)."""
    from hookbus.harnesses.install.codex import uninstall as do_uninstall

    change = do_uninstall(
        _target(scope, settings),
        trust_file=_trust_file(scope, settings, trust_file),
        dry_run=dry_run,
    )
    _report(ctx, change, json_flag, dry_run, "uninstalled")
