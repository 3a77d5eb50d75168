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
    """Print the effective configuration, passwords masked, with where each value came from.

    One line per setting, ``name = value  # source``, each with its full text: nothing is
    cut to the terminal's width or wrapped when piped (a URL or a path must stay whole to
    be copied). The sources, highest first: flag, HOOKBUS_* variable, the project's
    hookbus.toml (found from this folder upward), a running ``hookbus dev``, the user's
    hookbus.toml, the default.
    """
    loaded = state(ctx).loaded()
    data = loaded.masked
    if want_json(ctx, json_flag):
        print_json(
            {
                "file": str(loaded.file) if loaded.file else None,
                "user_file": str(loaded.user_file) if loaded.user_file else None,
                "dev_state": str(loaded.dev) if loaded.dev else None,
                "settings": data,
                "sources": loaded.sources,
            }
        )
        return
    import json
    import sys

    lines = [
        "# hookbus configuration",
        f"# project file: {loaded.file or 'none (no hookbus.toml here or above)'}",
        f"# user file: {loaded.user_file or 'none'}",
        f"# running hookbus dev: {loaded.dev or 'none'}",
    ]
    for key, value in _flatten(data):
        shown = "none" if value is None else json.dumps(value)
        lines.append(f"{key} = {shown}  # {loaded.sources.get(key, 'default')}")
    sys.stdout.write("\n".join(lines) + "\n")


def _flatten(data: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    for key, value in data.items():
        if isinstance(value, dict) and value and not prefix:
            rows.extend(_flatten(value, f"{key}."))
        else:
            rows.append((f"{prefix}{key}", value))
    return rows
