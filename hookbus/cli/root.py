"""The typer app behind ``hookbus``: the global options and the sub-commands of every part.

:func:`hookbus.cli.main` runs the lean commands itself and hands everything else here.
Errors from the library (:class:`HookBusError`) become one line on stderr and their exit
code (:func:`hookbus.cli.support.exit_code_for`); usage errors exit 64, never click's 2,
which an agent CLI would read as a decision.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Sequence
from typing import Annotated

import typer

from hookbus.cli.helptext import HelpGroup
from hookbus.cli.support import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    CliState,
    exit_code_for,
    fail,
    report_error,
)
from hookbus.errors import HookBusError

app = typer.Typer(
    name="hookbus",
    help="A Redis message bus that lets many AI agents share one fleet of lifecycle hooks.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=True,
    cls=HelpGroup,
)


def _version(value: bool) -> None:
    if value:
        from hookbus._version import __version__

        typer.echo(f"hookbus {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    redis_url: Annotated[
        str | None,
        typer.Option(
            "--redis-url",
            help="Redis URL (default: $HOOKBUS_REDIS_URL, then redis_url in hookbus.toml, then "
            "the state file of a `hookbus dev` running here; `hookbus config show` says which).",
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
    log_format: Annotated[
        str | None,
        typer.Option(
            "--log-format",
            help="text, or json: one JSON object per line (default: $HOOKBUS_LOG_FORMAT, "
            "then log_format in hookbus.toml, then text).",
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """hookbus: blocking hooks by request/reply, the rest fanned out to RQ workers."""
    # run() passes the CliState in, so that it can tell whether an error needs JSON.
    cli = ctx.obj if isinstance(ctx.obj, CliState) else CliState()
    cli.json = cli.json or json_output
    ctx.obj = cli
    # Flags win over env and file; load_settings reads HOOKBUS_* itself so that
    # `config show` can tell an env value from a flag.
    cli.config_file = config
    cli.overrides = {
        "redis_url": redis_url,
        "namespace": namespace,
        "log_level": log_level,
        "log_format": log_format,
    }
    level = log_level
    fmt = log_format
    if level is None or fmt is None:
        try:
            configured = cli.raw().settings
            level = level or configured.log_level
            fmt = fmt or configured.log_format
        except HookBusError:
            # a bad config is reported by the command that needs it
            level, fmt = level or "WARNING", fmt or "text"
    if fmt not in ("text", "json"):
        fail(
            f"log format must be text or json, got {fmt!r} "
            "(--log-format, HOOKBUS_LOG_FORMAT or log_format in hookbus.toml)",
            EXIT_USAGE,
        )
    if not isinstance(logging.getLevelName(level.upper()), int):
        fail(
            f"log level must be DEBUG, INFO, WARNING, ERROR or CRITICAL, got {level!r} "
            "(--log-level, HOOKBUS_LOG_LEVEL or log_level in hookbus.toml)",
            EXIT_USAGE,
        )
    from hookbus.cli.logs import configure_logging

    configure_logging(level, "json" if fmt == "json" else "text")


# Sub-commands contributed by the parts: (module, attribute, name, is_group). A name with a
# space ("hooks audit") adds a command to a group registered earlier in this table.
_PARTS: tuple[tuple[str, str, str, bool], ...] = (
    ("hookbus.cli.hooks.manage", "app", "hooks", True),
    ("hookbus.cli.hooks.authoring", "audit", "hooks audit", False),
    ("hookbus.cli.hooks.authoring", "write", "hooks write", False),
    ("hookbus.cli.hooks.authoring", "approve", "hooks approve", False),
    ("hookbus.cli.hooks.authoring", "reject", "hooks reject", False),
    ("hookbus.cli.hooks.authoring", "pending", "hooks pending", False),
    ("hookbus.cli.hooks.history", "history", "hooks history", False),
    ("hookbus.cli.publish", "publish", "publish", False),
    ("hookbus.cli.fleet.worker", "worker", "worker", False),
    ("hookbus.cli.fleet.dlq", "app", "dlq", True),
    ("hookbus.cli.fleet.reload", "reload", "reload", False),
    ("hookbus.cli.hooks.keys", "app", "keys", True),
    ("hookbus.cli.fleet.status", "status", "status", False),
    ("hookbus.cli.fleet.tail", "tail", "tail", False),
    ("hookbus.cli.fleet.dev", "dev", "dev", False),
    ("hookbus.cli.fleet.demo", "demo", "demo", False),
    ("hookbus.cli.fleet.replay", "replay", "replay", False),
    ("hookbus.cli.fleet.state", "app", "state", True),
    ("hookbus.cli.fleet.state", "notify", "notify", False),
    ("hookbus.cli.fleet.state", "notices_app", "notices", True),
    ("hookbus.cli.hooks.mcp", "mcp", "mcp", False),
    ("hookbus.cli.config", "app", "config", True),
    ("hookbus.cli.agents.registry", "app", "agents", True),
    ("hookbus.cli.agents.tmux", "tmux", "tmux", False),
    ("hookbus.cli.agents.gateway", "gateway", "gateway", False),
    ("hookbus.cli.approvals", "app", "approvals", True),
    ("hookbus.cli.console", "console", "console", False),
    ("hookbus.cli.agents.doctor", "doctor", "doctor", False),
)

#: The module whose attribute ``<cli>`` is the generated command group of that row of the
#: adapter table (``hookbus claude-code``, ``hookbus codex``...).
_ADAPTER_GROUPS = "hookbus.cli.agents.groups"


def parts() -> tuple[tuple[str, str, str, bool], ...]:
    """:data:`_PARTS` and one command group per row of the adapter table."""
    from hookbus.harnesses.adapters import names

    return _PARTS + tuple((_ADAPTER_GROUPS, name, name, True) for name in names())


#: The groups registered so far, by name, and the _PARTS entries already added.
_groups: dict[str, typer.Typer] = {}
_added: set[tuple[str, str, str, bool]] = set()


def _assemble(command: str | None = None) -> None:
    """Register the sub-commands of :func:`parts` on the app: only those of
    ``command`` when it names one, else all of them (root ``--help``, an unknown command).

    Importing every part costs most of a second (pydantic manifests, redis-py, the audit),
    so ``hookbus config show`` should not pay for ``hookbus hooks``'s imports."""
    table = parts()
    known = {name.split(" ")[0] for _, _, name, _ in table}
    for part in table:
        module_name, attr, name, is_group = part
        if part in _added or (command in known and name.split(" ")[0] != command):
            continue
        _added.add(part)
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        obj = getattr(module, attr)
        group_name, _, command_name = name.rpartition(" ")
        if is_group:
            _groups[name] = obj
            app.add_typer(obj, name=name)
        elif group_name:
            if group_name in _groups:
                _groups[group_name].command(command_name)(obj)
        else:
            app.command(name)(obj)


def _command_of(args: Sequence[str]) -> str | None:
    """The command ``args`` name after the global options (``None`` if unclear)."""
    from hookbus.cli import _split_globals

    split = _split_globals(args)
    if split is None or not split[1] or split[1][0].startswith("-"):
        return None
    return split[1][0]


def run(args: Sequence[str], prog_name: str = "hookbus") -> int:
    """Run the typer app on ``args``; return the exit code.

    click would exit 2 on a usage error, the code an agent CLI reads as "denied"; so the app
    runs outside click's standalone mode and this function prints errors and picks codes."""
    _assemble(_command_of(args))
    try:  # typer vendors click since 0.2x
        from typer._click import exceptions as click_exceptions
    except ImportError:  # pragma: no cover - older typer runs on click itself
        from click import exceptions as click_exceptions  # type: ignore[no-redef,unused-ignore]

    cli = CliState()
    try:
        result = app(args=list(args), prog_name=prog_name, standalone_mode=False, obj=cli)
    except HookBusError as exc:
        report_error(str(cli.located(exc)), as_json=cli.json)
        return exit_code_for(exc)
    except click_exceptions.ClickException as exc:
        _show_click_error(exc)
        return EXIT_USAGE if isinstance(exc, click_exceptions.UsageError) else exc.exit_code
    except typer.Abort:
        report_error("aborted", as_json=cli.json)
        return EXIT_ERROR
    return result if isinstance(result, int) else EXIT_OK


def _show_click_error(exc: Exception) -> None:
    """click's own rendering of a usage error (the rich panel typer draws, or plain)."""
    try:
        from typer import rich_utils

        rich_utils.rich_format_error(exc)  # type: ignore[arg-type,unused-ignore]
    except ImportError:  # pragma: no cover - typer without rich
        exc.show()  # type: ignore[attr-defined]
