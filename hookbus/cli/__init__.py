"""The ``hookbus`` command: a thin typer shell over the library.

Each part of the package contributes its own sub-commands; this module only assembles them
and owns the global options. Errors from the library (:class:`HookBusError`) become one red
line on stderr and exit code 1.
"""

from __future__ import annotations

import importlib
import logging
from typing import Annotated

import typer

from hookbus.cli.support import (
    EXIT_ERROR,
    EXIT_USAGE,
    CliState,
    fail,
    report_error,
)
from hookbus.errors import HookBusError

app = typer.Typer(
    name="hookbus",
    help="A Redis message bus that lets many AI agents share one fleet of lifecycle hooks.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        import hookbus

        typer.echo(f"hookbus {hookbus.__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    redis_url: Annotated[
        str | None,
        typer.Option(
            "--redis-url", help="Redis URL (default: $HOOKBUS_REDIS_URL, then hookbus.toml)."
        ),
    ] = None,
    namespace: Annotated[
        str | None,
        typer.Option(
            "--namespace", "-n", help="Key namespace (default: $HOOKBUS_NAMESPACE, then 'default')."
        ),
    ] = None,
    config: Annotated[
        str | None,
        typer.Option("--config", "-c", envvar="HOOKBUS_CONFIG", help="Path of hookbus.toml."),
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Machine-readable JSON output.")
    ] = False,
    log_level: Annotated[
        str | None,
        typer.Option(
            "--log-level",
            help="Logging level (default: $HOOKBUS_LOG_LEVEL, then log_level in hookbus.toml, "
            "then WARNING).",
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """hookbus: blocking hooks by request/reply, the rest fanned out to RQ workers."""
    # main() passes the CliState in, so that it can tell whether an error needs JSON.
    cli = ctx.obj if isinstance(ctx.obj, CliState) else CliState()
    cli.json = cli.json or json_output
    ctx.obj = cli
    # Flags win over env and file; load_settings reads HOOKBUS_* itself so that
    # `config show` can tell an env value from a flag.
    cli.config_file = config
    cli.overrides = {"redis_url": redis_url, "namespace": namespace, "log_level": log_level}
    level = log_level
    if level is None:
        try:
            level = cli.loaded().settings.log_level
        except HookBusError:
            level = "WARNING"  # a bad config is reported by the command that needs it
    if not isinstance(logging.getLevelName(level.upper()), int):
        fail(
            f"log level must be DEBUG, INFO, WARNING, ERROR or CRITICAL, got {level!r} "
            "(--log-level, HOOKBUS_LOG_LEVEL or log_level in hookbus.toml)",
            EXIT_USAGE,
        )
    logging.basicConfig(
        level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


# Sub-commands contributed by the parts: (module, attribute, name, is_group). A name with a
# space ("hooks audit") adds a command to a group registered earlier in this table.
_PARTS: tuple[tuple[str, str, str, bool], ...] = (
    ("hookbus.cli.hooks", "app", "hooks", True),
    ("hookbus.cli.hooks_authoring", "audit", "hooks audit", False),
    ("hookbus.cli.hooks_authoring", "write", "hooks write", False),
    ("hookbus.cli.publish", "publish", "publish", False),
    ("hookbus.cli.worker", "worker", "worker", False),
    ("hookbus.cli.dlq", "app", "dlq", True),
    ("hookbus.cli.reload", "reload", "reload", False),
    ("hookbus.cli.status", "status", "status", False),
    ("hookbus.cli.dev", "dev", "dev", False),
    ("hookbus.cli.demo", "demo", "demo", False),
    ("hookbus.cli.mcp", "mcp", "mcp", False),
    ("hookbus.cli.config", "app", "config", True),
    ("hookbus.cli.agents", "app", "agents", True),
    ("hookbus.cli.tmux", "tmux", "tmux", False),
)


def _assemble() -> None:
    groups: dict[str, typer.Typer] = {}
    for module_name, attr, name, is_group in _PARTS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        obj = getattr(module, attr)
        group_name, _, command_name = name.rpartition(" ")
        if is_group:
            groups[name] = obj
            app.add_typer(obj, name=name)
        elif group_name:
            if group_name in groups:
                groups[group_name].command(command_name)(obj)
        else:
            app.command(name)(obj)


_assembled = False


def main() -> None:
    """Entry point of the console script and of ``python -m hookbus``."""
    global _assembled
    if not _assembled:
        _assemble()
        _assembled = True
    cli = CliState()
    try:
        app(standalone_mode=True, obj=cli)
    except HookBusError as exc:
        report_error(str(exc), as_json=cli.json)
        raise SystemExit(EXIT_ERROR) from None
