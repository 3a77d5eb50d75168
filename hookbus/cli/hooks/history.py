"""``hookbus hooks history``: who changed the hook fleet, from the hash-chained history.

Lists every recorded write, approval, rejection, reload and rollback (oldest first) and
checks the chain (:mod:`hookbus.bundles.history`). Exit codes: 0 the chain is intact, 1 it is
broken (each break is printed; ``--json`` carries them under ``chain.breaks``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.markup import escape

from hookbus.cli.support import (
    EXIT_ERROR,
    Column,
    console,
    err_console,
    print_json,
    print_table,
    state,
    want_json,
)

#: The columns of ``hooks history``: actors, hook names and hashes are never broken.
_COLUMNS = (
    Column("at", keep=True),
    Column("action", keep=True),
    Column("actor", keep=True),
    Column("hook", keep=True),
    Column("sha256", keep=True),
)


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def history(
    ctx: typer.Context,
    limit: Annotated[
        int | None, typer.Option("--limit", help="Show only the newest N entries.", min=1)
    ] = None,
    json_flag: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """List every change to the fleet's hooks (write, approve, reject, reload, rollback)."""
    from hookbus.bundles import history as fleet_history
    from hookbus.bus.connection import connect

    settings = state(ctx).settings()
    client = connect(settings.effective_redis_url)
    entries = fleet_history.read(client, settings.namespace)
    chain = fleet_history.verify_anchored(client, settings.namespace)
    shown = entries[-limit:] if limit else entries
    if want_json(ctx, json_flag):
        print_json(
            {
                "ok": chain.ok,
                "entries": [
                    {k: e.to_dict()[k] for k in ("action", "actor", "hook", "sha256", "at")}
                    | {"id": e.id, "extra": e.extra}
                    for e in shown
                ],
                "chain": {"ok": chain.ok, "entries": chain.entries, "breaks": chain.breaks},
            }
        )
    else:
        rows = [(_when(e.at), e.action, e.actor, e.hook, e.sha256[:16]) for e in shown]
        if shown:
            print_table(f"hook history of namespace {settings.namespace}", _COLUMNS, rows)
        else:
            console.print("no changes recorded yet")
        for line in chain.breaks:
            err_console.print(f"[bold red]chain broken:[/] {escape(line)}", highlight=False)
    if not chain.ok:
        raise typer.Exit(EXIT_ERROR)
