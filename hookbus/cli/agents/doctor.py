"""``hookbus doctor``: is each agent CLI on this machine guarded by the fleet?

Exit codes: 0 every CLI found is guarded and the fleet answers; 1 a guard would fail open
(hookbus not installed, a guard without ``onFailure: "block"`` or its shell fallback, an
untrusted Codex hook, a CLI version that cannot fail closed); 69 nothing fails open but the
fleet does not answer from a hook's environment (every guarded call is denied), or no CLI
was found and the fleet does not answer from this shell; 64 an unknown CLI name.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from hookbus.cli.support import console, print_json, want_json

if TYPE_CHECKING:
    from hookbus.harnesses.doctor import FleetReport

_MARKS = {"fails_open": "[red]FAILS OPEN[/]", "blocks": "[yellow]BLOCKS[/]", "note": "note"}


def doctor(
    ctx: typer.Context,
    clis: Annotated[
        list[str] | None,
        typer.Argument(help="Agent CLIs to check (claude-code, codex...); default: all on PATH."),
    ] = None,
    root: Annotated[
        Path | None,
        typer.Option("--root", help="A folder standing in for / for the managed scope."),
    ] = None,
    json_flag: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """Check each agent CLI: version tried, hooks per scope, fail-closed guards, the fleet.

    For every CLI found on PATH (or named): its version against those hookbus was tried
    with and what still fails open in it; hookbus's hooks in each scope (user, project,
    local, managed), Codex's trust, onFailure on guards, the hook command resolving to this
    hookbus; Redis and a chain worker reachable from the hook's own environment.
    """
    from hookbus.harnesses.adapters import ADAPTER_MODULES
    from hookbus.harnesses.doctor import diagnose

    unknown = [name for name in clis or [] if name not in ADAPTER_MODULES]
    if unknown:
        raise typer.BadParameter(
            f"unknown CLI {', '.join(unknown)}; known: {', '.join(ADAPTER_MODULES)}",
            param_hint="CLIS",
        )
    report = diagnose(clis or [], root=root)
    if want_json(ctx, json_flag):
        print_json(report.as_dict())
        raise typer.Exit(report.exit_code)
    for cli in report.clis:
        version = cli.version or "version unknown"
        tried = "tried" if cli.version_tried else f"not tried (tried: {', '.join(cli.tried)})"
        console.print(
            f"[bold]{escape(cli.label)}[/] ({escape(cli.binary or 'not on PATH')}): "
            f"{escape(version)}, {tried}",
            highlight=False,
        )
        for scope in cli.scopes:
            events = ", ".join(scope.events) if scope.events else "no hookbus hooks"
            console.print(f"  {scope.scope}: {escape(scope.path)}: {escape(events)}")
        if cli.fleet is not None:
            fleet = cli.fleet
            state = "answers" if fleet.chain_worker else escape(fleet.detail or "no answer")
            console.print(
                f"  fleet from the hook's environment ({escape(fleet.environment)}): "
                f"{escape(fleet.redis_url)} namespace {escape(fleet.namespace)}: {state}",
                highlight=False,
            )
        for finding in cli.all_findings():
            console.print(f"  {_MARKS[finding.severity]}: {escape(finding.message)}")
        for fact in cli.fails_open_in_version:
            console.print(f"  fails open in this version: {escape(fact)}", highlight=False)
    if report.not_found:
        console.print(f"not on PATH: {', '.join(report.not_found)}", highlight=False)
    if report.fleet is not None:
        _print_fleet(report.fleet)
    raise typer.Exit(report.exit_code)


def _print_fleet(fleet: FleetReport) -> None:
    """Which fleet this shell reaches and whether a chain worker answers there."""
    if fleet.chain_worker:
        state = "a chain worker answers"
    else:
        state = f"[red]no answer[/]: {escape(fleet.detail or 'unknown')}"
    where = f"{escape(fleet.redis_url)} namespace {escape(fleet.namespace)}"
    if not fleet.redis_url:
        where = "no fleet configured"
    console.print(f"fleet ({escape(fleet.environment)} environment): {where}: {state}")
