"""`hookbus status`: workers, bundle versions, stream lag, pending and failed work."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from hookbus.cli.support import (
    console,
    print_json,
    state,
    want_json,
)

if TYPE_CHECKING:
    from hookbus.workers.fleet_status import FleetStatus
from hookbus.cli.reload import _age, _when


def _status_renderable(status: FleetStatus) -> Any:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    meta = status.bundle
    if status.bundle_version:
        who = f" by {meta.who}" if meta and meta.who else ""
        when = f" at {_when(meta.created_ms)}" if meta else ""
        hooks = f", {meta.hook_count} hooks" if meta else ""
        head = Text(f"bundle {status.bundle_version}{hooks}{who}{when}")
    else:
        head = Text("no bundle pushed (workers run their --hooks-dir)")
    workers = Table(title=f"workers ({status.namespace})")
    workers.add_column("state", min_width=4, no_wrap=True)
    workers.add_column("id", overflow="fold")
    workers.add_column("role")
    workers.add_column("host:pid", overflow="fold")
    workers.add_column("version", min_width=12, no_wrap=True)
    for name in ("hooks", "uptime", "beat", "done/err", "p50/p99 ms"):
        workers.add_column(name)
    for w in status.workers:
        i = w.info
        state_mark = "up" if w.alive else "[red]DEAD[/]"
        stale = i.version != status.bundle_version and status.bundle_version is not None
        version = f"[yellow]{i.version}[/]" if stale else (i.version or "-")
        problems = f" [yellow]({len(i.problems)} problem(s))[/]" if i.problems else ""
        workers.add_row(
            state_mark,
            i.id,
            i.role,
            f"{i.host}:{i.pid}",
            version,
            f"{i.hooks}{problems}",
            _age(w.uptime_ms),
            f"{_age(w.last_seen_ms)} ago",
            f"{i.processed}/{i.errors}",
            f"{i.p50_ms:.2f}/{i.p99_ms:.2f}",
        )
    streams = Table(title="streams")
    for name in ("stream", "length", "group", "consumers", "pending", "lag"):
        streams.add_column(name)
    for s in status.streams:
        if not s.groups:
            streams.add_row(s.name, str(s.length), "-", "-", "-", "-")
        for g in s.groups:
            lag = "?" if g.lag is None else str(g.lag)
            streams.add_row(s.name, str(s.length), g.name, str(g.consumers), str(g.pending), lag)
    queues = Table(title="RQ queues")
    for name in ("queue", "queued", "started", "failed"):
        queues.add_column(name)
    for q in status.queues:
        if q.error:
            queues.add_row(q.name, f"[red]{escape(q.error)}[/]", "-", "-")
        else:
            queues.add_row(q.name, str(q.queued), str(q.started), str(q.failed))
    parts: list[Any] = [head, workers, streams, queues]
    if status.pruned:
        parts.append(Text(f"pruned long-dead workers: {', '.join(status.pruned)}"))
    return Group(*parts)


def status(
    ctx: typer.Context,
    json_flag: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
    watch: Annotated[bool, typer.Option("--watch", help="Refresh live until Ctrl-C.")] = False,
    interval: Annotated[
        float,
        typer.Option("--interval", min=0.1, help="Seconds between refreshes with --watch."),
    ] = 1.0,
    iterations: Annotated[
        int,
        typer.Option("--iterations", min=0, hidden=True, help="Stop --watch after N refreshes."),
    ] = 0,
) -> None:
    """Show the bundle, the workers (dead ones marked), streams and RQ queues."""
    from hookbus.bus.connection import connect
    from hookbus.workers.fleet_status import gather

    settings = state(ctx).settings()
    client = connect(settings.effective_redis_url)
    rq_client = connect(settings.effective_rq_redis_url)
    if want_json(ctx, json_flag):
        print_json(gather(client, settings, rq_client=rq_client).to_dict())
        return
    if not watch:
        console.print(_status_renderable(gather(client, settings, rq_client=rq_client)))
        return
    from rich.live import Live

    count = 0
    with Live(
        _status_renderable(gather(client, settings, rq_client=rq_client)),
        console=console,
        refresh_per_second=4,
    ) as live:
        try:
            while iterations <= 0 or count < iterations:
                time.sleep(interval)
                live.update(_status_renderable(gather(client, settings, rq_client=rq_client)))
                count += 1
        except KeyboardInterrupt:
            pass
