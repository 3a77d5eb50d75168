"""`hookbus status`: workers, bundle versions, stream lag, pending and failed work."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from hookbus.cli.fleet.reload import _age, _when
from hookbus.cli.support import (
    EXIT_UNAVAILABLE,
    console,
    print_error,
    print_json,
    state,
    want_json,
)

if TYPE_CHECKING:
    import redis

    from hookbus.bundles.history import ChainReport
    from hookbus.bus.settings.schema import Settings
    from hookbus.workers.fleet.status import FleetStatus, WorkerStatus

log = logging.getLogger(__name__)

#: Below this width the workers table drops host:pid and uptime and folds the state into
#: the id, so that it fits an 80-column terminal without truncated headers.
COMPACT_BELOW_COLUMNS = 120


def _workers_table(status: FleetStatus, width: int) -> Any:
    from rich import box
    from rich.table import Table

    compact = width < COMPACT_BELOW_COLUMNS
    troubled = [w for w in status.workers if w.info.problems]
    caption = (
        "* problems loading hooks: `hookbus status --json` lists them"
        if compact and troubled
        else None
    )
    table = Table(
        title=f"workers ({status.namespace})",
        caption=caption,
        box=box.SIMPLE_HEAD if compact else box.HEAVY_HEAD,
        show_edge=not compact,
        pad_edge=not compact,
    )
    if not compact:
        table.add_column("state", min_width=4, no_wrap=True)
    names = {w.info.id: _worker_name(w.info.id, w.info.role, compact) for w in status.workers}
    longest = max(
        (len(names[w.info.id]) + (0 if w.alive else 5) for w in status.workers), default=2
    )
    table.add_column("worker" if compact else "id", overflow="fold", min_width=min(longest, 26))
    if not compact:
        table.add_column("role", no_wrap=True)
    if not compact:
        table.add_column("host:pid", overflow="fold")
    table.add_column("version", min_width=12, no_wrap=True)
    latency_header = "p50/p99" if compact else "p50/p99 ms"
    for name in ("hooks", *(() if compact else ("uptime",)), "beat", "done/err", latency_header):
        table.add_column(name, no_wrap=True)
    for w in status.workers:
        table.add_row(*_worker_row(w, status, names[w.info.id], compact))
    return table


def _worker_row(w: WorkerStatus, status: FleetStatus, name: str, compact: bool) -> list[str]:
    """One worker's cells, in the columns :func:`_workers_table` made for ``compact``."""
    i = w.info
    stale = i.version != status.bundle_version and status.bundle_version is not None
    version = f"[yellow]{i.version}[/]" if stale else (i.version or "-")
    if compact:
        hooks = f"{i.hooks}[yellow]*[/]" if i.problems else str(i.hooks)
    else:
        problems = f" [yellow]({len(i.problems)} problem(s))[/]" if i.problems else ""
        hooks = f"{i.hooks}{problems}"
    counts = [hooks, f"{_age(w.last_seen_ms)} ago", f"{i.processed}/{i.errors}"]
    latency = f"{i.p50_ms:.2f}/{i.p99_ms:.2f}"
    if compact:
        who = escape(name) if w.alive else f"[red]DEAD {escape(name)}[/]"
        return [who, version, *counts, latency]
    state_mark = "up" if w.alive else "[red]DEAD[/]"
    return [
        state_mark,
        escape(i.id),
        i.role,
        f"{i.host}:{i.pid}",
        version,
        counts[0],
        _age(w.uptime_ms),
        *counts[1:],
        latency,
    ]


def _worker_name(worker_id: str, role: str, compact: bool) -> str:
    """The id, with the role in front when the compact table has no role column and the id
    does not already start with it (heartbeat ids are ``<role>-<host>-<pid>-<tag>``)."""
    if not compact or worker_id.startswith(role):
        return worker_id
    return f"{role} {worker_id}"


#: A worker that left a hook out of its set: the beat's field and the line it gets.
_LEFT_OUT_LINES = (
    (
        "missing_guards",
        "GUARD LEFT OUT: {id} could not build a guard of {kinds}: those requests are denied "
        "(see its problems)",
    ),
    (
        "missing_kinds",
        "HOOK LEFT OUT: {id} could not build a hook deciding {kinds}: those requests are "
        "answered by the failure policy (see its problems)",
    ),
)


def _left_out_lines(worker_id: str, extra: dict[str, Any]) -> list[Any]:
    from rich.text import Text

    lines: list[Any] = []
    for field, line in _LEFT_OUT_LINES:
        kinds = extra.get(field)
        if isinstance(kinds, list) and kinds:
            shown = ", ".join(str(k) for k in kinds)
            lines.append(Text(line.format(id=worker_id, kinds=shown), style="red"))
    return lines


def _notify_lines(status: FleetStatus) -> list[Any]:
    """A red line when approval notifications failed: the people they were for were not told."""
    from rich.text import Text

    from hookbus.workers.fleet.status import notifications_failed

    failed = notifications_failed(status.workers)
    if not failed:
        return []
    return [
        Text(
            f"NOTIFY: {failed} approval notification(s) failed after their retries: operators "
            "were not told (the chain workers' log says which notifier)",
            style="red",
        )
    ]


def _judge_lines(status: FleetStatus) -> list[Any]:
    """One line per judge hook, summed over the live workers: what its model costs."""
    from rich.text import Text

    from hookbus.workers.fleet.status import judge_totals

    totals = judge_totals(status.workers)
    lines: list[Any] = []
    for hook, t in totals.items():
        failed = ", ".join(f"{c} {n}" for c, n in sorted(t["failures"].items()))
        p50 = f", median call {t['p50_ms']:.0f} ms" if t["p50_ms"] is not None else ""
        lines.append(
            Text(
                f"JUDGE {hook}: {t['calls']} model call(s), {t['served']} verdict(s) shared, "
                f"failures: {failed or 'none'}, {t['tokens']} tokens{p50}",
                style="yellow" if failed else "",
            )
        )
    return lines


def _trust_lines(status: FleetStatus, history: ChainReport | None) -> list[Any]:
    """What an operator must not miss: unsigned or refused bundles, unhealthy or unconfined
    workers, and a broken change history. Each is a line of its own, in colour."""
    from rich.text import Text

    lines: list[Any] = []
    live = [w for w in status.workers if w.alive]
    unsigned = [w.info.id for w in live if w.info.extra.get("trust") == "unsigned"]
    if unsigned:
        lines.append(
            Text(
                f"UNSIGNED: {len(unsigned)} worker(s) load bundles without verifying a signature "
                "(set HOOKBUS_VERIFY_KEY_FILE; `hookbus keys generate`)",
                style="yellow",
            )
        )
    for w in live:
        extra = w.info.extra
        refused = extra.get("refused")
        if isinstance(refused, dict):
            serving = (
                f"it serves bundle {w.info.version}"
                if w.info.version
                else "it runs NO hooks: requests get the empty chain's or a policy's answer"
            )
            what = f"bundle {refused['version']}" if refused.get("version") else "its hooks folder"
            lines.append(
                Text(
                    f"REFUSED: {w.info.id} refused {what}: {refused.get('reason')} ({serving})",
                    style="red",
                )
            )
        unhealthy = extra.get("unhealthy")
        if unhealthy:
            lines.append(Text(f"UNHEALTHY: {w.info.id}: {unhealthy}", style="red"))
        at_cap = extra.get("hooks_at_cap")
        if isinstance(at_cap, dict) and at_cap:
            hung = ", ".join(
                f"{hook} ({n.get('abandoned')}/{n.get('cap')} abandoned calls still running, "
                f"{n.get('refused')} runs refused)"
                for hook, n in sorted(at_cap.items())
                if isinstance(n, dict)
            )
            lines.append(
                Text(
                    f"AT CAP: {w.info.id}: hook(s) at their concurrency cap, answered by "
                    f"on_error: {hung} (hung calls: fix the hook)",
                    style="red",
                )
            )
        confinement = extra.get("confinement")
        if isinstance(confinement, str) and confinement.startswith("none"):
            lines.append(
                Text(
                    f"UNCONFINED: {w.info.id} runs hooks without confinement ({confinement})",
                    style="yellow",
                )
            )
        if isinstance(confinement, str) and "agent hooks refused" in confinement:
            why = confinement.split("agent hooks refused: ", 1)[-1]
            lines.append(
                Text(
                    f"AGENT HOOKS REFUSED: {w.info.id} cannot sandbox them ({why})", style="yellow"
                )
            )
        lines.extend(_left_out_lines(w.info.id, extra))
    for problem in status.stream_problems:
        lines.append(Text(f"STREAM {problem.line()}", style="bold red"))
    lines.extend(_unguarded_lines(status))
    if history is not None and not history.ok:
        lines.append(
            Text(
                f"HISTORY BROKEN: {len(history.breaks)} break(s) in the change history: "
                + "; ".join(history.breaks[:3]),
                style="bold red",
            )
        )
    return lines


def _unguarded_lines(status: FleetStatus) -> list[Any]:
    """Tool calls that ran with no guard asked: an agent whose hook stopped running."""
    from rich.text import Text

    lines: list[Any] = []
    for call in status.unguarded[:5]:
        lines.append(
            Text(
                f"UNGUARDED: agent {call.agent or '?'} ({call.cli}) ran {call.tool or '?'} in "
                f"session {call.session or '?'} at {_when(call.at_ms)} with no guard asked: "
                "check that its hook is installed and runs (hookbus doctor)",
                style="bold red",
            )
        )
    total = sum(status.unguarded_counts.values())
    if total > len(lines):
        agents = sorted({agent or "?" for agent, _ in status.unguarded_counts})
        lines.append(
            Text(f"UNGUARDED: {total} call(s) in all, by {', '.join(agents)}", style="bold red")
        )
    return lines


def _status_renderable(
    status: FleetStatus, width: int = COMPACT_BELOW_COLUMNS, history: ChainReport | None = None
) -> Any:
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
    workers = _workers_table(status, width)
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
    refused = [Text(status.refused, style="bold red")] if status.refused else []
    parts: list[Any] = [head, *refused, *_trust_lines(status, history), workers, streams, queues]
    parts.extend(_judge_lines(status))
    parts.extend(_notify_lines(status))
    if status.pruned:
        parts.append(Text(f"pruned long-dead workers: {', '.join(status.pruned)}"))
    for s in status.streams:
        if s.lost:
            parts.append(Text(_lost_line(s.name, s.lost), style="bold red"))
    return Group(*parts)


def _lost_line(name: str, lost: int) -> str:
    """What a stream's entries trimmed before their consumers read them cost, and the fix."""
    if name.split(" ")[0] == "decisions":
        return (
            f"{name}: {lost} entries were trimmed before the request observers read them; "
            "those requests' observer hooks never ran (raise streams.decisions_maxlen)"
        )
    return (
        f"{name}: {lost} entries were trimmed before their consumer group read them "
        "(a producer's XADD MAXLEN); they are lost"
    )


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
    """Show the bundle, the workers (dead ones marked), streams and RQ queues.

    Exits 1 when a stream cannot be written (ids exhausted or ahead of Redis's clock, a
    missing consumer group) or Redis answers BUSY; 69 when no chain worker is alive (every
    blocking request is then denied by the failure policy).
    """
    from hookbus.bus.connection import bus_client, connect
    from hookbus.workers.fleet.status import gather

    settings = state(ctx).settings()
    client = bus_client(settings)  # on a cluster: the namespace's master
    rq_client = connect(settings.effective_rq_redis_url)
    if want_json(ctx, json_flag):
        data = gather(client, settings, rq_client=rq_client).to_dict()
        history = _history(client, settings.namespace)
        data["history"] = (
            None
            if history is None
            else {"ok": history.ok, "entries": history.entries, "breaks": history.breaks}
        )
        print_json(data)
        if data["stream_problems"]:
            raise typer.Exit(1)
        _exit_without_chain_worker(data["workers"], settings)
        return
    snapshot = gather(client, settings, rq_client=rq_client)  # Redis down: one error line
    history = _history(client, settings.namespace)
    if not watch:
        console.print(_status_renderable(snapshot, console.width, history))
        if snapshot.stream_problems:
            raise typer.Exit(1)
        _exit_without_chain_worker([w.to_dict() for w in snapshot.workers], settings)
        return
    from rich.live import Live

    count = 0
    with Live(
        _status_renderable(snapshot, console.width, history),
        console=console,
        refresh_per_second=4,
    ) as live:
        try:
            while iterations <= 0 or count < iterations:
                time.sleep(interval)
                snapshot = gather(client, settings, rq_client=rq_client)
                live.update(_status_renderable(snapshot, console.width, history))
                count += 1
        except KeyboardInterrupt:
            pass


def _exit_without_chain_worker(workers: list[dict[str, Any]], settings: Settings) -> None:
    """Exit 69 (unavailable) when no chain worker is alive: every blocking request is then
    denied by the failure policy, which a script checking ``hookbus status`` must not read
    as a healthy fleet. The line says where it looked and the command that starts one."""
    from hookbus.bus.settings.loader import mask_url

    if any(w.get("alive") and w.get("role") == "chain" for w in workers):
        return
    print_error(
        f"no chain worker alive in namespace {settings.namespace!r} at "
        f"{mask_url(settings.effective_redis_url)}: every blocking request is answered by the "
        "failure policy (degraded, deny); start one with `hookbus worker --role chain` "
        "(or the whole fleet with `hookbus dev`)"
    )
    raise typer.Exit(EXIT_UNAVAILABLE)


def _history(client: redis.Redis, namespace: str) -> ChainReport | None:
    """The change history's chain check, and its tail against the anchor the current
    bundle's signature covers; None when it cannot be read (status still shows the rest:
    the history is operator-only under the shipped ACL)."""
    from hookbus.bundles import history
    from hookbus.errors import HookBusError

    try:
        return history.verify_anchored(client, namespace)
    except (HookBusError, OSError) as exc:
        log.warning("cannot read the change history: %s", exc)
        return None
