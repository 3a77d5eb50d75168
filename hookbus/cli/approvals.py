"""``hookbus approvals``: the operator's side of the approval inbox.

``list`` shows what waits (``--watch`` follows it live), ``allow`` / ``deny`` decide one
item, once: the waiting agent gets the answer at once, the decision log and the change
history record who decided and how long the request waited. A second decision is refused
and names who decided first.

Exit codes: 0 ok, 1 no such approval or already decided / expired, 69 Redis unreachable.
"""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from hookbus.cli.support import EXIT_ERROR, console, err_console, print_json, state, want_json
from hookbus.errors import ApprovalClosed, ApprovalNotFound, ApprovalRefused

if TYPE_CHECKING:
    from hookbus.approvals.inbox import ApprovalInbox
    from hookbus.approvals.model import ApprovalItem

app = typer.Typer(
    help="Requests parked for an operator: list them, allow or deny one.", no_args_is_help=True
)

#: How often ``list --watch`` looks for changes, in seconds.
WATCH_POLL_S = 0.25

JsonOption = Annotated[bool, typer.Option("--json", help="JSON output.")]
IdArgument = Annotated[str, typer.Argument(help="The approval id (from `approvals list`).")]
ReasonOption = Annotated[
    str, typer.Option("--reason", "-r", help="Why: sent to the agent with the decision.")
]
AsOption = Annotated[
    str | None,
    typer.Option(
        "--as",
        help="Who decides, recorded as operator:<name> (default: user@host).",
        envvar="HOOKBUS_OPERATOR",
    ),
]


def _inbox(ctx: typer.Context) -> ApprovalInbox:
    from hookbus.approvals.inbox import ApprovalInbox

    return ApprovalInbox(state(ctx).settings())


def _clock(ms: int) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ms / 1000)) if ms else "-"


def _table(items: list[ApprovalItem], now_ms: float) -> object:
    from rich.table import Table

    table = Table(title=f"approvals waiting for an operator ({len(items)})")
    # the id is what the operator copies: never folded
    table.add_column("id", no_wrap=True, min_width=12)
    for column in ("agent / session", "kind tool", "input", "hook: reason"):
        table.add_column(column, overflow="fold")
    table.add_column("asked / left", no_wrap=True)
    for item in items:
        left = max(int((item.expires_ms - now_ms) / 1000), 0)
        table.add_row(
            *(
                escape(cell)
                for cell in (
                    item.id,
                    f"{item.agent or '-'} {item.session or ''}".strip(),
                    f"{item.kind} {item.tool}".strip(),
                    item.full_input or item.input,
                    f"{item.hook or '?'}: {item.reason}",
                    f"{_clock(item.asked_ms)} {left} s",
                )
            )
        )
    return table


@app.command("list")
def list_cmd(
    ctx: typer.Context,
    json_flag: JsonOption = False,
    watch: Annotated[
        bool, typer.Option("--watch", "-w", help="Keep showing the list as items come and go.")
    ] = False,
    recent: Annotated[
        int, typer.Option("--recent", min=0, help="Also show this many decided ones.")
    ] = 0,
) -> None:
    """List the requests waiting for an operator (id, agent, session, kind, tool and its
    input, the hook and its reason, asked at, time left)."""
    inbox = _inbox(ctx)
    as_json = want_json(ctx, json_flag)
    if not watch:
        items = inbox.pending()
        if as_json:
            done = inbox.recent(recent) if recent else []
            print_json(
                {"pending": [i.to_dict() for i in items], "recent": [i.to_dict() for i in done]}
            )
            return
        _print(inbox, items, recent)
        return
    _watch(inbox, as_json)


def _print(inbox: ApprovalInbox, items: list[ApprovalItem], recent: int) -> None:
    if not items:
        console.print("no approvals waiting", markup=False, highlight=False)
    else:
        console.print(_table(items, time.time() * 1000))
    for item in inbox.recent(recent) if recent else []:
        by = item.decided_by or "policy"
        console.print(
            f"{item.id} {item.state} by {by} after {(item.waited_ms or 0) / 1000:.1f} s: "
            f"{item.kind} {item.tool} {item.input}",
            markup=False,
            highlight=False,
        )


def _watch(inbox: ApprovalInbox, as_json: bool) -> None:
    """Follow the approvals logs; print the list again (or, with --json, one JSON object
    per line per change: ``type`` pending|allowed|denied|expired, ``approval``, ``by``)
    whenever something happens. Ends on Ctrl-C."""
    marks = {p: inbox.log_tail(p) for p in inbox.partitions()}
    if not as_json:
        _print(inbox, inbox.pending(), 0)
    try:
        while True:
            changed = []
            for partition in inbox.partitions():
                marks[partition], entries = inbox.log_since(partition, marks[partition])
                changed += entries
            if not changed:
                for partition in inbox.partitions():
                    inbox.sweep(partition)
                time.sleep(WATCH_POLL_S)
                continue
            if as_json:  # one object per line, flushed: a pipe's reader sees each at once
                for entry in changed:
                    sys.stdout.write(json.dumps(entry) + "\n")
                sys.stdout.flush()
            else:
                _print(inbox, inbox.pending(), 0)
    except KeyboardInterrupt:
        return


def _decide(
    ctx: typer.Context, approval: str, outcome: str, reason: str, who: str | None, json_flag: bool
) -> None:
    inbox = _inbox(ctx)
    as_json = want_json(ctx, json_flag)
    try:
        decided = inbox.decide(approval, outcome, who=who, note=reason, via="cli")
    except (ApprovalNotFound, ApprovalClosed, ApprovalRefused) as exc:
        if as_json:
            data: dict[str, object] = {"ok": False, "id": approval, "reason": str(exc)}
            if isinstance(exc, ApprovalClosed):
                data.update(state=exc.state, decided_by=exc.decided_by, at_ms=exc.at_ms)
            print_json(data)
        else:
            err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(EXIT_ERROR) from None
    if as_json:
        print_json({"ok": True, **decided.item.to_dict(), "recorded": decided.recorded})
        return
    item = decided.item
    if item.state == "pending":  # one allow of several needed
        console.print(
            f"{item.id} allowed by {decided.decided_by} ({len(item.allowed_by)} of "
            f"{item.approvers} operators): it waits for another operator's allow",
            markup=False,
            highlight=False,
        )
        return
    console.print(
        f"{item.id} {item.state} by {decided.decided_by} after {decided.waited_ms / 1000:.1f} s "
        f"({item.kind} {item.tool} from {item.agent or 'an agent'})",
        markup=False,
        highlight=False,
    )
    if not decided.recorded:
        err_console.print("warning: the decision was not recorded in the change history")


@app.command("allow")
def allow(
    ctx: typer.Context,
    approval: IdArgument,
    reason: ReasonOption = "",
    who: AsOption = None,
    json_flag: JsonOption = False,
) -> None:
    """Allow a parked request: the waiting agent goes ahead at once."""
    _decide(ctx, approval, "allow", reason, who, json_flag)


@app.command("deny")
def deny(
    ctx: typer.Context,
    approval: IdArgument,
    reason: ReasonOption = "",
    who: AsOption = None,
    json_flag: JsonOption = False,
) -> None:
    """Deny a parked request: the waiting agent is refused at once, with the reason."""
    _decide(ctx, approval, "deny", reason, who, json_flag)


@app.command("export")
def export(
    ctx: typer.Context,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="WHEN",
            help="Only answers from then on: a duration back (24h, 7d) or an ISO date/time.",
        ),
    ] = None,
) -> None:
    """Write every operator's answer as JSON lines (who, when, from where, the outcome and
    the sha256 of the input it applied to), oldest first, from the change history; exits 1
    after writing when the history's hash chain is broken."""
    from hookbus.approvals import trail
    from hookbus.bundles import history
    from hookbus.bus.connection import bus_client
    from hookbus.cli.support import EXIT_USAGE, fail

    settings = state(ctx).settings()
    client = bus_client(settings)
    try:
        since_ms = trail.parse_since(since, int(time.time() * 1000)) if since else 0
    except ValueError as exc:
        fail(f"--since: {exc}", EXIT_USAGE)
    out = sys.stdout
    for record in trail.answers(client, settings.namespace, since_ms=since_ms):
        out.write(json.dumps(record, separators=(",", ":")) + "\n")
    out.flush()
    report = history.verify_anchored(client, settings.namespace)
    if not report.ok:
        err_console.print(
            "[bold red]warning:[/] the change history's hash chain is broken: these records "
            "cannot be trusted as complete (see hookbus hooks history)",
            highlight=False,
        )
        raise typer.Exit(EXIT_ERROR)
