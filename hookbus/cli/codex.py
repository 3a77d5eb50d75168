"""``hookbus codex``: the per-event hook command, and its config.toml installer.

``hook`` itself runs on the lean path (:mod:`hookbus.harnesses.codex_adapter`, dispatched by
:mod:`hookbus.cli` before typer loads); it is declared here too so that ``--help`` shows it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hookbus.cli.support import print_json, state, want_json

app = typer.Typer(
    help="Codex on the fleet: the hook command and its config.toml installer.",
    no_args_is_help=True,
)

ScopeOption = Annotated[
    str,
    typer.Option(
        "--scope",
        help="user ($CODEX_HOME/config.toml, else ~/.codex/config.toml) or project "
        "(.codex/config.toml).",
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
    """Answer one Codex hook event: its JSON on stdin, Codex's answer on stdout.

    Observe-only events are published and the command returns at once; blocking ones wait
    for the fleet's decision. When the bus cannot answer, guards deny and the rest pass.
    """
    from hookbus.harnesses.codex_adapter import codex

    cli = state(ctx)
    options = dict(cli.overrides, config=cli.config_file)
    code = codex(["--timeout", str(timeout)], options)
    raise typer.Exit(code or 0)


def _target(scope: str, settings: Path | None) -> Path:
    from hookbus.harnesses.codex_install import settings_path

    if settings is not None:
        return settings
    if scope not in ("user", "project"):
        raise typer.BadParameter("must be user or project", param_hint="--scope")
    return settings_path(scope)  # type: ignore[arg-type]


def _trust_file(scope: str, settings: Path | None, trust_file: Path | None) -> Path | None:
    """Codex reads trust records from the user's config only: a project's hooks are
    trusted there; a user config (or an explicit --settings) holds its own."""
    from hookbus.harnesses.codex_install import settings_path

    if trust_file is not None:
        return trust_file
    if settings is None and scope == "project":
        return settings_path("user")
    return None


TrustFileOption = Annotated[
    Path | None,
    typer.Option(
        "--trust-file",
        help="The config.toml that gets the trust records (default: the user's for "
        "--scope project, else the edited file itself).",
    ),
]


def _report(ctx: typer.Context, changes: object, json_flag: bool, dry_run: bool, verb: str) -> None:
    from hookbus.harnesses.codex_install import Changes

    assert isinstance(changes, Changes)
    if want_json(ctx, json_flag):
        print_json(
            {
                "settings": str(changes.path),
                "trust_file": str(changes.trust.path if changes.trust else changes.path),
                "changed": changes.changed,
                "written": changes.changed and not dry_run,
                "added": list(changes.added),
                "removed": list(changes.removed),
                "diff": changes.diff(),
            }
        )
        return
    for change in changes.all:
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
    trust_file: TrustFileOption = None,
    dry_run: DryRunOption = False,
    json_flag: JsonOption = False,
) -> None:
    """Add hookbus's hook entries to a Codex config.toml, recorded as trusted (idempotent)."""
    from hookbus.harnesses.codex_install import install as do_install

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
    from hookbus.harnesses.codex_install import uninstall as do_uninstall

    change = do_uninstall(
        _target(scope, settings),
        trust_file=_trust_file(scope, settings, trust_file),
        dry_run=dry_run,
    )
    _report(ctx, change, json_flag, dry_run, "uninstalled")
