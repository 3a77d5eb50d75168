"""``hookbus dlq``: list, show, requeue and purge dead letters (failed hook jobs).

Exit codes: 0 ok, 1 error (no such dead letter), 64 usage, 69 Redis unreachable.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from hookbus.cli.support import (
    EXIT_ERROR,
    EXIT_USAGE,
    Column,
    console,
    fail,
    print_json,
    print_table,
    state,
    want_json,
)

if TYPE_CHECKING:
    import redis

    from hookbus.bus.settings.loader import Settings

#: The columns of ``dlq list``: a job id (what ``dlq show`` and ``requeue`` take), the
#: hook, the kind and the event id are never broken.
DEAD_LETTER_COLUMNS = (
    Column("job", keep=True),
    Column("hook", keep=True),
    Column("kind", keep=True),
    Column("event", keep=True),
    Column("events", justify="right"),
    Column("tries", justify="right"),
    Column("failed at", keep=True),
    Column("error"),
)

app = typer.Typer(
    help="Dead letters: non-blocking hook jobs that failed every try.", no_args_is_help=True
)


@contextlib.contextmanager
def _client(ctx: typer.Context) -> Iterator[tuple[redis.Redis, Settings]]:
    """A client of the RQ Redis (``rq.redis_url``, else the bus's) and the settings; redis-py
    errors in the block become hookbus errors (one line, not a traceback)."""
    from hookbus.bus.connection import connect, translated

    settings = state(ctx).settings()
    url = settings.effective_rq_redis_url
    with translated(url):
        yield connect(url), settings


@app.command("list")
def list_cmd(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Show at most this many.")] = 100,
    json_flag: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """List dead letters, oldest first."""
    from hookbus.workers.fleet import dead_letters

    with _client(ctx) as (client, settings):
        dead = dead_letters.list_dead(client, settings, limit=limit)
        total = dead_letters.count_dead(client, settings)
    if want_json(ctx, json_flag):
        print_json({"total": total, "jobs": [d.to_dict() for d in dead]})
        return
    if not dead:
        console.print("no dead letters")
        return
    rows = [
        (
            d.id,
            d.hook or "?",
            d.kind or "",
            d.event or "",
            str(d.events),
            str(d.tries),
            d.failed_at or "",
            d.error or "",
        )
        for d in dead
    ]
    print_table(f"dead letters ({total})", DEAD_LETTER_COLUMNS, rows)


@app.command("show")
def show_cmd(
    ctx: typer.Context,
    job_id: Annotated[str, typer.Argument(help="Job id, from `hookbus dlq list`.")],
    json_flag: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """Show one dead letter: its hook, error, traceback and event(s)."""
    from hookbus.errors import JobNotFound
    from hookbus.workers.fleet import dead_letters

    try:
        with _client(ctx) as (client, settings):
            data = dead_letters.show_dead(client, settings, job_id)
    except JobNotFound as exc:
        fail(str(exc), EXIT_ERROR)
    if want_json(ctx, json_flag):
        print_json(data)
        return
    for key in (
        "id",
        "hook",
        "kind",
        "event",
        "events",
        "tries",
        "failed_at",
        "enqueued_at",
        "error",
    ):
        console.print(f"[bold]{key}[/]: {escape(str(data.get(key)))}", highlight=False)
    if data.get("traceback"):
        console.print("[bold]traceback[/]:", highlight=False)
        console.print(data["traceback"], highlight=False, markup=False)
    for event in data.get("events_data", []):
        console.print_json(data=event)


@app.command("requeue")
def requeue_cmd(
    ctx: typer.Context,
    job_id: Annotated[str | None, typer.Argument(help="Job id to requeue.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Requeue every dead letter.")] = False,
    json_flag: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """Put dead letters back on the queue (their declared retries restored)."""
    from hookbus.errors import JobNotFound
    from hookbus.workers.fleet import dead_letters

    if (job_id is None) == (not all_):
        fail("give a job id or --all (not both)", EXIT_USAGE)
    try:
        with _client(ctx) as (client, settings):
            done = (
                dead_letters.requeue_all(client, settings)
                if all_
                else [dead_letters.requeue_dead(client, settings, job_id or "")]
            )
    except JobNotFound as exc:
        fail(str(exc), EXIT_ERROR)
    if want_json(ctx, json_flag):
        print_json({"requeued": done})
        return
    console.print(f"requeued {len(done)} job(s)")


@app.command("purge")
def purge_cmd(
    ctx: typer.Context,
    job_ids: Annotated[
        list[str] | None, typer.Argument(help="Job ids to delete (default: every dead letter).")
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    json_flag: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """Delete dead letters for good."""
    from hookbus.workers.fleet import dead_letters

    with _client(ctx) as (client, settings):
        if not job_ids and not yes:
            total = dead_letters.count_dead(client, settings)
            if total and not typer.confirm(f"delete all {total} dead letters?"):
                raise typer.Exit(EXIT_ERROR)
        removed = dead_letters.purge_dead(client, settings, list(job_ids) if job_ids else None)
    missing = len(set(job_ids)) - removed if job_ids else 0
    if missing:
        fail(
            f"purged {removed} job(s); {missing} of the given job ids are not dead letters "
            "(see `hookbus dlq list`)"
        )
    if want_json(ctx, json_flag):
        print_json({"purged": removed})
        return
    console.print(f"purged {removed} job(s)")
