"""What ``hookbus hooks run NAME`` does: one hook against one event, its result and trace
printed (the command itself, its options and help, is in :mod:`hookbus.cli.hooks.manage`).

The developer's inner loop: the hook runs as a worker would run it (also when disabled),
on an event from a file or stdin. Exit codes: 0 continue, 1 the hook failed, 2 it said
deny / ask / halt.
"""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec
import typer
from rich.markup import escape

from hookbus.bus.wire import Event, HookResult, HookRun, to_builtins
from hookbus.cli.hooks.manage import _catalogue, _dir, _registry
from hookbus.cli.support import (
    EXIT_DENIED,
    EXIT_ERROR,
    EXIT_USAGE,
    console,
    fail,
    print_json,
    want_json,
)
from hookbus.hooks.describe import event_from_json
from hookbus.hooks.manifest import load_manifest

__all__ = ["run_hook"]


def _read_event(source: str, default_kind: str) -> Event:
    """An Event from a file or stdin (see :func:`hookbus.hooks.describe.event_from_json`)."""
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        fail(f"cannot read the event from {source}: {exc.strerror or exc}")
    try:
        return event_from_json(text, default_kind)
    except ValueError as exc:
        fail(f"the event in {source} {exc}")


def run_hook(
    ctx: typer.Context,
    name: str,
    event_source: str,
    kind: str | None,
    timeout: float | None,
    hooks_dir: Path | None,
    json_flag: bool,
) -> None:
    """What ``hookbus hooks run`` does: run the hook, print, exit 0 / 1 / 2."""
    from hookbus.authoring.manifest_edit import find_manifest

    if timeout is not None and timeout <= 0:
        fail(f"--timeout must be more than 0 seconds, got {timeout:g}", EXIT_USAGE)
    folder = _dir(ctx, hooks_dir)
    catalogue = _catalogue(ctx)
    manifest = load_manifest(find_manifest(folder, name, catalogue=catalogue), catalogue=catalogue)
    event = _read_event(event_source, kind or manifest.events[0])
    if kind is not None:
        event = msgspec.structs.replace(event, kind=kind)
    registry = _registry(ctx)
    registry.register_manifest(manifest.model_copy(update={"enabled": True}))
    try:
        result, trace = registry.run_one(manifest.name, event, timeout_s=timeout)
    finally:
        registry.close()
    _print_run(ctx, json_flag, result, trace)
    if result is None:
        raise typer.Exit(EXIT_ERROR)
    if result.outcome != "continue":
        raise typer.Exit(EXIT_DENIED)


def _print_run(
    ctx: typer.Context, json_flag: bool, result: HookResult | None, trace: HookRun
) -> None:
    if want_json(ctx, json_flag):
        print_json(
            {
                "result": to_builtins(result) if result is not None else None,
                "trace": to_builtins(trace),
            }
        )
        return
    style = {"continue": "green", "error": "red", "timeout": "red"}.get(trace.outcome, "yellow")
    console.print(
        f"[{style}]{trace.outcome}[/] in {trace.duration_us / 1000:.1f} ms", highlight=False
    )
    if trace.error:
        console.print(f"error: {escape(trace.error)}", highlight=False, soft_wrap=True)
    if result is not None:
        if result.reason:
            console.print(f"reason: {escape(result.reason)}", highlight=False, soft_wrap=True)
        answer = to_builtins(result)
        if answer:
            console.print_json(data=answer)
        else:
            console.print("(no answer: continue)")
    for note in trace.notes:
        console.print(f"[yellow]note:[/] {escape(note)}", highlight=False, soft_wrap=True)
