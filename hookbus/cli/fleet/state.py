"""``hookbus state``, ``hookbus notify`` and ``hookbus notices``: the fleet's shared state.

``state list|show|reset`` shows the live limit windows, locks and escalation counters and
deletes one (recorded in the change history); ``notify`` tells every matching running
session something once; ``notices list|retract`` manages what was sent.

Exit codes: 0 ok, 1 no such state or notice, 64 usage, 69 Redis unreachable.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from hookbus.cli.support import EXIT_ERROR, EXIT_USAGE, console, fail, print_json, state, want_json

app = typer.Typer(
    help="The fleet's shared state: limit windows, locks and escalation counters.",
    no_args_is_help=True,
)
notices_app = typer.Typer(help="Notices sent to running sessions.", no_args_is_help=True)


def _ttl(ms: int) -> str:
    from hookbus.state.templates import format_ms

    return "no expiry" if ms < 0 else format_ms(ms)


def _holder(entry: Any) -> str:
    holder = entry.holder
    if holder is None:
        return ""
    since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(holder.since_ms / 1000))
    agent = f"agent {holder.agent}, " if holder.agent else ""
    return f"{agent}session {holder.session} since {since}"


@app.command("list")
def list_cmd(
    ctx: typer.Context,
    json_flag: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """List every live limit window, lock and escalation counter.

    Example: hookbus state list --json
    """
    from hookbus.state.admin import list_state

    entries = list_state(state(ctx).settings())
    if want_json(ctx, json_flag):
        print_json([e.to_dict() for e in entries])
        return
    if not entries:
        console.print("no fleet state (no limit counted, no lock held)")
        return
    for entry in entries:
        what = _holder(entry) if entry.holder is not None else f"{entry.count} counted"
        console.print(f"{entry.state_id}  {what}  (expires in {_ttl(entry.ttl_ms)})", markup=False)


@app.command("show")
def show_cmd(
    ctx: typer.Context,
    state_id: Annotated[str, typer.Argument(help="An id from `hookbus state list`.")],
    json_flag: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """Show one limit window, lock or escalation counter.

    Example: hookbus state show lock:deploy:production
    """
    from hookbus.state.admin import show_state

    entry = show_state(state(ctx).settings(), state_id)
    if entry is None:
        fail(
            f"no fleet state {state_id!r} (expired, released or never set): "
            "see `hookbus state list`"
        )
    if want_json(ctx, json_flag):
        print_json(entry.to_dict())
        return
    console.print(f"id: {entry.state_id}", markup=False)
    console.print(f"kind: {entry.kind}", markup=False)
    if entry.holder is not None:
        console.print(f"held by: {_holder(entry)}", markup=False)
    if entry.count is not None:
        console.print(f"counted: {entry.count}", markup=False)
    console.print(f"expires in: {_ttl(entry.ttl_ms)}", markup=False)


@app.command("reset")
def reset_cmd(
    ctx: typer.Context,
    state_id: Annotated[str, typer.Argument(help="An id from `hookbus state list`.")],
    json_flag: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """Delete one limit window, lock or counter (recorded in the change history).

    Example: hookbus state reset lock:deploy:production
    """
    from hookbus.state.admin import reset_state

    if not reset_state(state(ctx).settings(), state_id):
        fail(f"no fleet state {state_id!r} to reset: see `hookbus state list`")
    if want_json(ctx, json_flag):
        print_json({"ok": True, "reset": state_id})
        return
    console.print(f"reset {state_id}", markup=False)


def notify(
    ctx: typer.Context,
    text: Annotated[str, typer.Argument(help="What to tell the sessions.")],
    severity: Annotated[
        str, typer.Option("--severity", metavar="info|warning|critical", help="How serious.")
    ] = "info",
    ttl: Annotated[
        str, typer.Option("--ttl", metavar="DURATION", help="How long it stays (30m, 2h, 1d).")
    ] = "1h",
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            metavar="PATTERN",
            help="Only agents whose id matches (glob); with --session, the session's agent.",
        ),
    ] = None,
    session: Annotated[
        str | None,
        typer.Option(
            "--session", metavar="ID", help="Only this session of the agent named by --agent."
        ),
    ] = None,
    blocking: Annotated[
        bool,
        typer.Option(
            "--blocking", help="Critical only: refuse every tool call of a matching session."
        ),
    ] = False,
    json_flag: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """Tell every matching running session something, once, on its next event.

    Example: hookbus notify "main is frozen until 18:00" --severity warning --ttl 2h
    """
    from hookbus.state.admin import send_notice
    from hookbus.state.notices import SEVERITIES
    from hookbus.state.templates import parse_duration

    if severity not in SEVERITIES:
        fail(f"--severity must be one of {', '.join(SEVERITIES)}, got {severity!r}", EXIT_USAGE)
    try:
        ttl_ms = parse_duration(ttl)
    except ValueError as exc:
        fail(f"--ttl: {exc}", EXIT_USAGE)
    try:
        notice = send_notice(
            state(ctx).settings(),
            text,
            severity=severity,
            ttl_ms=ttl_ms,
            agent=agent,
            session=session,
            blocking=blocking,
        )
    except ValueError as exc:
        fail(str(exc), EXIT_USAGE)
    if want_json(ctx, json_flag):
        print_json(notice.to_dict())
        return
    console.print(f"notice {notice.id} sent (expires in {ttl})", markup=False)


@notices_app.command("list")
def notices_list(
    ctx: typer.Context,
    json_flag: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """List the live notices, oldest first.

    Example: hookbus notices list
    """
    from hookbus.state.admin import list_notices

    live = list_notices(state(ctx).settings())
    if want_json(ctx, json_flag):
        print_json([n.to_dict() for n in live])
        return
    if not live:
        console.print("no live notices")
        return
    now_ms = time.time() * 1000
    for notice in live:
        scope = ", ".join(
            part
            for part in (
                f"agent {notice.agent}" if notice.agent else "",
                f"session {notice.session}" if notice.session else "",
                "blocking" if notice.blocking else "",
            )
            if part
        )
        console.print(
            f"{notice.id}  [{notice.severity}] {notice.text}"
            f"  ({scope or 'every session'}; expires in {_ttl(int(notice.expires_ms - now_ms))})",
            markup=False,
        )


@notices_app.command("retract")
def notices_retract(
    ctx: typer.Context,
    notice_id: Annotated[str, typer.Argument(help="A notice id from `hookbus notices list`.")],
    json_flag: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """Remove a notice at once (a blocking one stops refusing).

    Example: hookbus notices retract 01a2038697ba78b2
    """
    from hookbus.errors import NoticeNotFound
    from hookbus.state.admin import retract_notice

    try:
        retract_notice(state(ctx).settings(), notice_id)
    except NoticeNotFound as exc:
        fail(str(exc), EXIT_ERROR)
    if want_json(ctx, json_flag):
        print_json({"ok": True, "retracted": notice_id})
        return
    console.print(f"retracted {notice_id}", markup=False)
