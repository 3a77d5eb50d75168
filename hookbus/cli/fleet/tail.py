"""``hookbus tail``: watch events (or, with ``--decisions``, decisions) as they happen.

One line per entry for people (time, kind, agent, and what happened), or one JSON object
per line with ``--json``; ``--kind`` and ``--agent`` filter, ``--last N`` first shows the
last N entries of the log, and ``--count N`` exits after N lines (scripts, tests). Ctrl-C
ends it with exit 0. The reading is :mod:`hookbus.bus.tail`, over every partition of the
namespace (``HOOKBUS_PARTITIONS``; on a Redis Cluster each on its master).
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from typing import TYPE_CHECKING, Annotated

import typer

from hookbus.cli.support import EXIT_OK, EXIT_USAGE, fail, print_note, state, want_json

if TYPE_CHECKING:
    from hookbus.bus.settings.schema import Settings
    from hookbus.bus.tail import TailEntry


def _line(entry: TailEntry) -> str:
    """``12:03:04.123 PreToolUse agent=a1 deny by block-destructive (4.1 ms): reason``."""
    clock = time.strftime("%H:%M:%S", time.localtime(entry.ts_ms / 1000))
    head = f"{clock}.{entry.ts_ms % 1000:03d} {entry.kind or '?'}"
    if entry.agent:
        head += f" agent={entry.agent}"
    took = f" ({entry.duration_ms:.1f} ms)" if entry.duration_ms is not None else ""
    if entry.source == "event":
        if entry.error:
            return f"{head} {entry.error}"
        tool = (entry.payload or {}).get("tool_name")
        return f"{head} event {entry.id}" + (f" tool={tool}" if tool else "")
    if entry.source == "hook_run":
        error = f": {entry.error}" if entry.error else ""
        return f"{head} hook {entry.hook} {entry.outcome}{took}{error}"
    by = f" by {entry.hook}" if entry.hook else ""
    degraded = " (degraded: decided by policy)" if entry.degraded else ""
    reason = f": {entry.reason}" if entry.reason else ""
    return f"{head} {entry.outcome}{by}{took}{degraded}{reason}{_shadow(entry)}"


def _shadow(entry: TailEntry) -> str:
    """`` [shadow trial-guard: deny (no rm)]``: what shadow hooks would have decided."""
    said = [
        f"{run.get('hook')}: {run.get('outcome')}"
        + (f" ({run['reason']})" if run.get("reason") else "")
        for run in entry.shadow
    ]
    return f" [shadow {'; '.join(said)}]" if said else ""


def _say_where_requests_are(settings: Settings, kinds: list[str]) -> None:
    """A note on stderr when ``--kind`` names a blocking kind without ``--decisions``: its
    requests go to the request stream and the decision log, never to the event log that a
    plain tail reads, so without the note the command would wait in silence."""
    catalogue = settings.catalogue()
    blocking = [k for k in kinds if catalogue.resolve(k).blocking]
    if blocking:
        names = ", ".join(blocking)
        flags = " ".join(f"--kind {k}" for k in kinds)
        print_note(
            f"{names} requests (sent with --wait or by an agent's hook) are not in the event "
            f"log: this shows only {names} events published without --wait; to see the "
            f"requests and their decisions run `hookbus tail --decisions {flags}`"
        )


def _print(entry: TailEntry, as_json: bool) -> None:
    if as_json:
        import msgspec

        data = msgspec.to_builtins(entry)
        data["ts_ms"] = entry.ts_ms
        sys.stdout.write(json.dumps(data, default=str) + "\n")
    else:
        sys.stdout.write(_line(entry) + "\n")
    sys.stdout.flush()


def tail(
    ctx: typer.Context,
    decisions: Annotated[
        bool,
        typer.Option(
            "--decisions", help="Show decisions and hook runs (the decision log), not events."
        ),
    ] = False,
    kind: Annotated[
        list[str] | None,
        typer.Option("--kind", "-k", help="Only this event kind (aliases accepted; repeatable)."),
    ] = None,
    agent: Annotated[
        list[str] | None, typer.Option("--agent", "-a", help="Only this agent id (repeatable).")
    ] = None,
    last: Annotated[
        int, typer.Option("--last", min=0, help="First show the last N entries of the log.")
    ] = 0,
    count: Annotated[
        int, typer.Option("--count", "-c", min=0, help="Exit after N lines (0: never).")
    ] = 0,
    json_flag: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """Watch events (or decisions) as they happen, until Ctrl-C or --count lines."""
    from hookbus.bus import tail as tailing
    from hookbus.errors import UnknownEventKind

    settings = state(ctx).settings()
    as_json = want_json(ctx, json_flag)
    try:
        kinds = [settings.catalogue().canonical(k) for k in kind or []]
    except UnknownEventKind as exc:
        fail(str(exc), EXIT_USAGE)
    if not decisions:
        _say_where_requests_are(settings, kinds)
    wanted = tailing.TailFilter(kinds=kinds, agents=agent or [])
    parts = tailing.targets(settings)
    shown = 0

    def done() -> bool:
        return count > 0 and shown >= count

    try:
        backlog, after = tailing.last(parts, decisions=decisions, n=last)
        for entry in backlog:
            if wanted(entry) and not done():
                _print(entry, as_json)
                shown += 1
        followed = tailing.follow(parts, decisions=decisions, after=after, stop=done)
        with contextlib.closing(followed):  # stops the partitions' reading threads
            for entry in followed:
                if wanted(entry):
                    _print(entry, as_json)
                    shown += 1
                    if done():
                        break
    except KeyboardInterrupt:
        pass
    raise typer.Exit(EXIT_OK)
