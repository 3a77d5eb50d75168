"""`hookbus demo`: an embedded fleet, three scripted agents, and what to try next."""

from __future__ import annotations

from typing import Annotated

import typer

from hookbus.cli.support import console, state, want_json

NEXT_STEPS = "\n".join(
    [
        "What to try next:",
        "  hookbus dev --hooks-dir examples/hooks        a fleet of your own, left running",
        "  hookbus publish PreToolUse --wait --payload "
        + """'{"tool_name":"Bash","tool_input":{"command":"rm -rf /"}}'""",
        "  hookbus hooks create my-guard --event PreToolUse --hooks-dir examples/hooks",
        "  hookbus reload --hooks-dir examples/hooks     push a changed folder to every worker",
        "  hookbus claude-code install --scope project   put Claude Code's hooks on the bus",
    ]
)


def demo(
    ctx: typer.Context,
    json_flag: Annotated[bool, typer.Option("--json", help="One JSON line per step.")] = False,
) -> None:
    """Start an embedded fleet and watch three scripted agents use it."""
    import msgspec

    from hookbus.authoring.release import release_folder
    from hookbus.demo.scenario import DemoResult, Step, run_demo

    # Always an embedded server and a namespace of its own: the demo must never push its
    # hooks to a fleet the user configured.
    settings = msgspec.structs.replace(state(ctx).settings(), redis_url=None, namespace="demo")
    as_json = want_json(ctx, json_flag)

    def ready(result: DemoResult) -> None:
        if not as_json:
            console.print(
                f"[bold green]demo fleet[/] up at {result.url}, bundle {result.bundle}; "
                "three agents start now\n",
                highlight=False,
            )

    def report(step: Step) -> None:
        if as_json:
            _json_line(msgspec.to_builtins(step))
            return
        from rich.markup import escape

        color = {"allow": "green", "deny": "red", "ask": "yellow", "halt": "red"}.get(
            step.outcome, "cyan"
        )
        flag = " [yellow](degraded)[/]" if step.degraded else ""
        console.print(
            f"{escape(step.agent):<12} {step.kind:<12} [{color}]{step.outcome:<9}[/]"
            f"{step.ms:7.1f} ms  {escape(step.what)}{flag}",
            highlight=False,
            soft_wrap=True,
        )
        if step.detail:
            console.print(f"{'':<26}[dim]{escape(step.detail)}[/]", highlight=False, soft_wrap=True)

    result = run_demo(settings, release_folder, report, on_ready=ready)
    if as_json:
        _json_line({"telemetry_lines": result.telemetry_lines, "steps": len(result.steps)})
        return
    console.print(
        f"\n{result.telemetry_lines} telemetry line(s) written by the fan-out path; "
        "the demo fleet is stopped.\n",
        highlight=False,
    )
    console.print(NEXT_STEPS, markup=False, highlight=False, soft_wrap=True)


def _json_line(data: object) -> None:
    """One compact JSON object per line, so that ``--json`` output streams (JSON lines)."""
    import json
    import sys

    sys.stdout.write(json.dumps(data) + "\n")
    sys.stdout.flush()
