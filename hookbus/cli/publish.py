"""``hookbus publish``: put events on the bus from a shell.

Without ``--wait`` the event is appended to the event log (non-blocking hooks run on RQ
workers) and its id printed. With ``--wait`` it is sent as a blocking request and the
decision printed; the exit code says what was decided: 0 allow, 2 deny / ask / halt,
69 Redis unreachable (the failure policy's answer is printed), 1 error.
``--file events.jsonl`` publishes one event per line, in pipelined batches.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from hookbus.cli.lean import build_event, parse_payload, prepare_event, published, send_event
from hookbus.cli.support import (
    EXIT_DENIED,
    EXIT_ERROR,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    console,
    err_console,
    fail,
    print_json,
    state,
    want_json,
)
from hookbus.errors import HookBusError

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings
    from hookbus.bus.wire import Decision, Event

#: Events sent per pipelined round trip by ``--file``.
FILE_BATCH_EVENTS = 500


def _payload(raw: str | None) -> dict[str, Any]:
    if raw is None:
        return {}
    try:
        return parse_payload(sys.stdin.read() if raw == "-" else raw)
    except ValueError as exc:
        fail(str(exc), EXIT_ERROR)


def _say_parked(first: Decision) -> None:
    """On stderr while a parked request waits: its approval id and how to decide it."""
    approval = first.approval
    if approval is None:
        return
    import time

    until = time.strftime("%H:%M:%S", time.localtime((approval.expires_ms or 0) / 1000))
    err_console.print(
        f"parked for an operator as approval {approval.id} (hook {approval.hook or '?'}); "
        f"waiting until {until}: hookbus approvals allow|deny {approval.id}",
        markup=False,
        highlight=False,
    )


def _print_decision(decision: Decision, as_json: bool) -> None:
    from hookbus.bus.wire import to_builtins

    if as_json:
        # the wire omits default fields; a script must always find these two
        data = to_builtins(decision)
        print_json({"outcome": decision.outcome, "degraded": decision.degraded, **data})
        return
    colour = "green" if decision.outcome == "allow" else "red"
    line = f"[bold {colour}]{decision.outcome}[/]"
    if decision.reason:
        line += f": {escape(decision.reason)}"
    if decision.degraded:
        line += " [yellow](degraded: decided by policy, not by the hooks)[/]"
    console.print(line, highlight=False)
    for text in decision.context:
        console.print(f"  context: {text}", highlight=False, markup=False)
    for run in decision.trace:
        err = f" ({run.error})" if run.error else ""
        console.print(
            f"  {run.hook_id}: {run.outcome} in {run.duration_us / 1000:.1f} ms{err}",
            highlight=False,
            markup=False,
        )


def _publish_file(
    settings: Settings,
    path: Path,
    *,
    kind: str | None,
    session: str | None,
    agent: str | None,
    as_json: bool,
) -> None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from hookbus.bus import eventlog
    from hookbus.bus.connection import bus_client

    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror}", EXIT_ERROR)
    except UnicodeDecodeError:
        fail(f"cannot read {path}: not UTF-8 text (one JSON object a line)", EXIT_ERROR)
    events: list[Event] = []
    numbers: list[int] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            events.append(build_event(data, kind=kind, session=session, agent=agent))
            numbers.append(number)
        except ValueError as exc:
            fail(f"{path}:{number}: {exc}; nothing was published", EXIT_ERROR)
    for number, event in zip(numbers, events, strict=True):  # refuse the file before sending
        try:
            eventlog.prepare(settings, event)
        except HookBusError as exc:
            fail(f"{path}:{number}: {exc}; nothing was published", EXIT_ERROR)
    from hookbus.bus.policy.backlog import Gates

    client = bus_client(settings)  # on a cluster: eventlog reaches each partition's master
    ids: list[str] = []
    gates = Gates()  # one look at each stream's backlog, shared by the chunks
    with Progress(
        TextColumn("publishing"),
        BarColumn(),
        MofNCompleteColumn(),
        console=err_console,
        disable=as_json or not err_console.is_terminal,
    ) as progress:
        task = progress.add_task("publish", total=len(events))
        for start in range(0, len(events), FILE_BATCH_EVENTS):
            chunk = events[start : start + FILE_BATCH_EVENTS]
            eventlog.publish_many(client, settings, chunk, gates=gates)
            ids.extend(e.id for e in chunk)
            progress.advance(task, len(chunk))
    if as_json:
        print_json({"published": len(ids), "event_ids": ids})
    else:
        console.print(f"published {len(ids)} events from {path}")


def publish(
    ctx: typer.Context,
    kind: Annotated[
        str | None,
        typer.Argument(help="Event kind (PostToolUse, Stop, ...); optional with --file."),
    ] = None,
    payload: Annotated[
        str | None,
        typer.Option("--payload", "-p", help="Payload as a JSON object, or - to read stdin."),
    ] = None,
    session: Annotated[str | None, typer.Option("--session", help="Session id.")] = None,
    agent: Annotated[str | None, typer.Option("--agent", help="Agent id.")] = None,
    file: Annotated[
        Path | None,
        typer.Option(
            "--file", "-f", help="Publish every event of a JSON-lines file (one object a line)."
        ),
    ] = None,
    wait: Annotated[
        bool,
        typer.Option("--wait", help="Send as a blocking request and print the decision."),
    ] = False,
    deadline_ms: Annotated[
        int | None,
        typer.Option("--deadline-ms", min=1, help="With --wait: the deadline (default: config)."),
    ] = None,
    json_flag: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """Publish an event (prints its id), or with --wait ask for a decision.

    Exit codes: 0 published / allow, 2 deny, ask or halt, 69 Redis unreachable, 1 error.
    """
    settings = state(ctx).settings()
    as_json = want_json(ctx, json_flag)
    if file is not None:
        if wait:
            fail("--wait and --file do not go together", EXIT_USAGE)
        if payload is not None:
            fail("--payload and --file do not go together", EXIT_USAGE)
        _publish_file(settings, file, kind=kind, session=session, agent=agent, as_json=as_json)
        return
    if kind is None:
        fail("give an event KIND (or --file events.jsonl)", EXIT_USAGE)
    try:
        event = build_event({"payload": _payload(payload)}, kind=kind, session=session, agent=agent)
    except ValueError as exc:
        fail(str(exc), EXIT_ERROR)
    if wait:
        from hookbus.producers.sync_client import HookBus

        with HookBus(settings) as bus:
            decision = bus.request(event, deadline_ms=deadline_ms, on_parked=_say_parked)
            unreachable = bus.degraded_answers.get("redis", 0) > 0
        _print_decision(decision, as_json)
        # a script must tell "the guard said no" (2) from "no bus to ask" (69, as status)
        if unreachable:
            raise typer.Exit(EXIT_UNAVAILABLE)
        raise typer.Exit(EXIT_OK if decision.outcome == "allow" else EXIT_DENIED)
    # the same path as the lean `hookbus publish` (hookbus.cli.lean): one XADD over a socket
    entry_id = send_event(settings, prepare_event(settings, event), event.session_id)
    published(settings, event, entry_id, as_json=as_json)
