"""`hookbus replay`: re-run recorded requests against a candidate hooks folder."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from hookbus.cli.support import console, fail, print_json, state, want_json

if TYPE_CHECKING:
    from hookbus.workers.replay import Change


def replay(
    ctx: typer.Context,
    since: Annotated[
        str, typer.Option("--since", help="Start of the window: 15m, 2h, 1d ago, ISO time or ms.")
    ],
    hooks_dir: Annotated[
        Path,
        typer.Option(
            "--hooks-dir",
            "-d",
            help="The candidate hooks folder to replay against.",
            envvar="HOOKBUS_REPLAY_HOOKS_DIR",
        ),
    ],
    until: Annotated[
        str | None, typer.Option("--until", help="End of the window (default: now).")
    ] = None,
    json_flag: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """Show which recorded decisions the candidate hooks would change (nothing is sent)."""
    from rich.markup import escape
    from rich.progress import Progress

    from hookbus.bus.tail import targets
    from hookbus.hooks.loader import load_hooks
    from hookbus.hooks.registry import HookRegistry
    from hookbus.workers.replay import count_entries, parse_time_ms
    from hookbus.workers.replay import replay as run_replay

    settings = state(ctx).settings()
    as_json = want_json(ctx, json_flag)
    since_ms = parse_time_ms(since)
    until_ms = parse_time_ms(until) if until is not None else None
    if not hooks_dir.is_dir():
        fail(f"the candidate hooks folder {hooks_dir} does not exist")
    loaded = load_hooks(hooks_dir, catalogue=settings.catalogue())
    if loaded.problems:
        fail(
            f"the candidate folder {hooks_dir} does not load, so it cannot be replayed: "
            + "; ".join(str(p) for p in loaded.problems)
        )
    registry = HookRegistry.from_settings(settings)
    errors = registry.replace_dynamic(loaded.enabled, version=f"candidate:{hooks_dir}")
    if errors:
        fail("candidate hooks that cannot be registered: " + "; ".join(str(e) for e in errors))
    try:
        parts = targets(settings)  # every partition's decision log, each on its master
        if as_json:
            report = run_replay(parts, registry, since_ms=since_ms, until_ms=until_ms)
        else:
            total = count_entries(parts, since_ms, until_ms)
            with Progress(console=console, transient=True) as progress:
                task = progress.add_task("replaying", total=total)
                report = run_replay(
                    parts,
                    registry,
                    since_ms=since_ms,
                    until_ms=until_ms,
                    progress=lambda n: progress.advance(task, n),
                )
    finally:
        registry.close()
    if as_json:
        print_json(report.to_dict())
        return
    console.print(
        f"replayed {report.replayed} request(s); {len(report.changed)} would change"
        f" ({report.missing} no longer in the request stream, {report.degraded} decided by"
        " a policy, not replayed)",
        highlight=False,
    )
    if report.timed_out:
        console.print(
            f"  {len(report.timed_out)} differ only because a hook hit its deadline (not"
            " counted as changes; replay again on a quieter machine to compare them)",
            highlight=False,
        )
    for hook, said in sorted(report.shadow.items()):
        counts = ", ".join(f"{outcome} {n}" for outcome, n in sorted(said.items()))
        console.print(f"  shadow {escape(hook)}: {counts}", highlight=False)
    for change in report.changed:
        console.print(
            f"  {escape(change.request_id)} {change.kind}: {change.before} -> "
            f"[bold]{change.after}[/] {escape(credit(change))}",
            highlight=False,
            soft_wrap=True,
        )


def credit(change: Change) -> str:
    """Who decides the new outcome, in its own words, and who decided the old one:
    ``by no-dotenv (secrets stay unread)``, or ``(no hook stops it; was no-rm-rf: ...)``."""
    if change.hook is not None:
        said = f"by {change.hook}" + (f" ({change.reason})" if change.reason else "")
    else:
        said = "(no hook stops it"
        if change.was_hook is not None:
            said += f"; was {change.was_hook}" + (
                f": {change.was_reason}" if change.was_reason else ""
            )
        said += ")"
    return said
