"""`hookbus config`: the effective configuration and where each value came from."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from hookbus.cli.support import print_json, state, want_json

app = typer.Typer(help="Inspect the effective configuration.", no_args_is_help=True)


@app.command("show")
def config_show(
    ctx: typer.Context,
    json_flag: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """Print the effective configuration, passwords masked, with where each value came from."""
    loaded = state(ctx).loaded()
    data = loaded.masked
    if want_json(ctx, json_flag):
        print_json(
            {
                "file": str(loaded.file) if loaded.file else None,
                "settings": data,
                "sources": loaded.sources,
            }
        )
        return
    from rich.markup import escape
    from rich.table import Table

    from hookbus.cli.support import console

    table = Table(title=escape(f"hookbus configuration ({loaded.file or 'no hookbus.toml'})"))
    table.add_column("setting")
    table.add_column("value")
    table.add_column("source")
    for key, value in _flatten(data):
        table.add_row(key, escape(str(value)), escape(loaded.sources.get(key, "default")))
    console.print(table)


def _flatten(data: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    for key, value in data.items():
        if isinstance(value, dict) and value and not prefix:
            rows.extend(_flatten(value, f"{key}."))
        else:
            rows.append((f"{prefix}{key}", value))
    return rows
