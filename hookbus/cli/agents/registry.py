"""``hookbus agents``: the agent registry of supervised sessions.

Exit codes: 0 ok, 1 error (unknown agent, refused key or value, Redis unreachable).
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from hookbus.cli.support import (
    EXIT_ERROR,
    Column,
    console,
    fail,
    print_json,
    print_table,
    state,
    want_json,
)

if TYPE_CHECKING:
    from hookbus.supervisor.agent_registry import AgentRegistry

#: The columns of ``agents list``: ids and session names are never broken.
AGENT_COLUMNS = (
    Column("agent_id", keep=True),
    Column("tmux_session_name", keep=True),
    Column("openclaw_session_id", keep=True),
    Column("hook_mode", keep=True),
    Column("pane lines", justify="right"),
    Column("pressure threshold", justify="right"),
)

app = typer.Typer(
    help="The agent registry: which tmux session wakes which supervisor, and its hook settings.",
    no_args_is_help=True,
)

_SET_HELP = (
    "KEY=VALUE pairs: tmux_session_name, openclaw_session_id, system_prompt, enabled, "
    "auto_wake, topic_id, working_directory, claude_*; hook settings pane_capture_lines, "
    "context_pressure_threshold, autocompact_pct, hook_mode (also as hook_settings.KEY)."
)


@contextlib.contextmanager
def _registry(ctx: typer.Context) -> Iterator[AgentRegistry]:
    """The registry of the configured namespace; redis-py errors become hookbus errors."""
    from hookbus.bus.connection import connect, translated
    from hookbus.errors import HookBusError
    from hookbus.supervisor.agent_registry import AgentRegistry

    settings = state(ctx).settings()
    try:
        url = settings.effective_redis_url
        with translated(url):
            yield AgentRegistry(connect(url), settings.namespace)
    except HookBusError as exc:
        fail(str(exc), EXIT_ERROR)


def _pairs(pairs: list[str]) -> list[tuple[str, str]]:
    from hookbus.supervisor.agent_schema import parse_assignment

    return [parse_assignment(p) for p in pairs]


@app.command("list")
def list_cmd(
    ctx: typer.Context,
    json_flag: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """List the registered agents with their effective hook settings."""
    from hookbus.supervisor.agent_schema import effective_settings

    with _registry(ctx) as registry:
        global_part = registry.global_part()
        agents = registry.agents()
    rows = [
        {
            "agent_id": a["agent_id"],
            "tmux_session_name": a.get("tmux_session_name", ""),
            "openclaw_session_id": a.get("openclaw_session_id", ""),
            **effective_settings(a, global_part),
        }
        for a in agents
    ]
    if want_json(ctx, json_flag):
        print_json({"agents": rows})
        return
    if not rows:
        console.print("no agents (add one with `hookbus agents set ID tmux_session_name=NAME`)")
        return
    columns = ("agent_id", "tmux_session_name", "openclaw_session_id", "hook_mode")
    cells = [
        (
            *(str(row[c]) for c in columns),
            str(row["pane_capture_lines"]),
            f"{row['context_pressure_threshold']}%",
        )
        for row in rows
    ]
    print_table(f"agents ({len(rows)})", AGENT_COLUMNS, cells)


@app.command("show")
def show_cmd(
    ctx: typer.Context,
    agent_id: Annotated[str, typer.Argument(help="Agent id.")],
    json_flag: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """Show one agent and each effective hook setting with its tier.

    The tier is agent, global or default: the first one that sets the field wins."""
    with _registry(ctx) as registry:
        shown = registry.show(agent_id)
    if want_json(ctx, json_flag):
        print_json(shown)
        return
    agent = shown["agent"]
    for key, value in agent.items():
        if key != "hook_settings":
            console.print(f"[bold]{key}[/]: {escape(str(value))}", highlight=False)
    console.print("[bold]hook settings[/] (effective, from):", highlight=False)
    for key, value in shown["effective"].items():
        console.print(f"  {key}: {escape(str(value))}  ({shown['source'][key]})", highlight=False)


@app.command("set")
def set_cmd(
    ctx: typer.Context,
    agent_id: Annotated[str, typer.Argument(help="Agent id (created when new).")],
    pairs: Annotated[list[str] | None, typer.Argument(help=_SET_HELP)] = None,
    unset: Annotated[
        list[str] | None,
        typer.Option(
            "--unset",
            help="Remove a key (a hook setting falls back to the global "
            "value, then the default). Repeatable.",
        ),
    ] = None,
    json_flag: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """Set keys of one agent; a new agent needs tmux_session_name=NAME.

    Every pair is checked first: one refused key or value changes nothing."""
    if not pairs and not unset:
        raise typer.BadParameter("give at least one KEY=VALUE or --unset KEY")
    with _registry(ctx) as registry:
        assignments = _pairs(pairs or [])
        entry = registry.set(agent_id, assignments, unset or [])
    if want_json(ctx, json_flag):
        print_json({"ok": True, "agent": entry})
        return
    console.print(f"agent {escape(agent_id)} updated", highlight=False)


@app.command("set-global")
def set_global_cmd(
    ctx: typer.Context,
    pairs: Annotated[
        list[str] | None,
        typer.Argument(help="KEY=VALUE pairs (hook settings, global_status_openclaw_session_*)."),
    ] = None,
    unset: Annotated[
        list[str] | None, typer.Option("--unset", help="Remove a global key. Repeatable.")
    ] = None,
    json_flag: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """Set the global hook settings (the tier between each agent's and the defaults)."""
    if not pairs and not unset:
        raise typer.BadParameter("give at least one KEY=VALUE or --unset KEY")
    with _registry(ctx) as registry:
        assignments = _pairs(pairs or [])
        global_part = registry.set_global(assignments, unset or [])
    if want_json(ctx, json_flag):
        print_json({"ok": True, "global": global_part})
        return
    console.print("global settings updated", highlight=False)


@app.command("remove")
def remove_cmd(
    ctx: typer.Context,
    agent_id: Annotated[str, typer.Argument(help="Agent id.")],
) -> None:
    """Remove one agent: its session is no longer managed."""
    with _registry(ctx) as registry:
        registry.remove(agent_id)
    console.print(f"agent {escape(agent_id)} removed", highlight=False)


@app.command("import")
def import_cmd(
    ctx: typer.Context,
    file: Annotated[str, typer.Argument(help="Recovery-registry JSON file ('-' for stdin).")],
    json_flag: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """Replace the registry with a recovery-registry JSON file (the schema of
    :mod:`hookbus.supervisor.agent_schema`).

    The whole file is checked first: one refused key changes nothing."""
    from hookbus.errors import AgentRegistryError

    with _registry(ctx) as registry:
        if file == "-":
            text = sys.stdin.read()
        else:
            try:
                text = Path(file).read_text(encoding="utf-8")
            except OSError as exc:
                raise AgentRegistryError(f"cannot read {file}: {exc.strerror or exc}") from None
        count = registry.import_document(text)
    if want_json(ctx, json_flag):
        print_json({"ok": True, "agents": count})
        return
    console.print(f"imported {count} agent(s) from {escape(file)}", highlight=False)


@app.command("export")
def export_cmd(ctx: typer.Context) -> None:
    """Print the registry as recovery-registry JSON (what `import` reads)."""
    with _registry(ctx) as registry:
        document = registry.export_document()
    sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
