"""``hookbus <cli>`` for every row of the adapter table: ``hook``, ``install``, ``uninstall``.

One command group per row (:mod:`hookbus.harnesses.adapters`), generated here, so adding an
agent CLI adds no command module. ``hook`` itself runs on the lean path
(:func:`hookbus.harnesses.adapters.hook_entry`, dispatched by :mod:`hookbus.cli` before typer
loads); it is declared here too so that ``--help`` shows it. ``install`` / ``uninstall``
call the row's installer (:mod:`hookbus.harnesses.install.table`): the options every
installer takes, and the installer's own, added to the command's signature.

``getattr(groups, "claude-code")`` is that row's typer app (the CLI's part table names
them so).
"""

from __future__ import annotations

import importlib
import inspect
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from hookbus.cli.support import print_json, state, want_json
from hookbus.harnesses.adapters import ADAPTER_MODULES, Adapter, adapter, hook_entry
from hookbus.harnesses.install.settings_file import backup_path
from hookbus.harnesses.install.table import MANAGED, ExtraOption, Installer, Outcome

SettingsOption = Annotated[
    Path | None,
    typer.Option("--settings", help="The file to edit (overrides --scope)."),
]
RootOption = Annotated[
    Path | None,
    typer.Option(
        "--root",
        help="--scope managed: a folder standing in for / (try a managed install without root).",
    ),
]
DryRunOption = Annotated[bool, typer.Option("--dry-run", help="Print the change; write nothing.")]
VerboseOption = Annotated[
    bool, typer.Option("--verbose", "-v", help="Print the diff of each file written too.")
]
JsonOption = Annotated[bool, typer.Option("--json", help="JSON output.")]
TimeoutOption = Annotated[
    float,
    typer.Option("--timeout", help="The hook entry's timeout in s; the deadline stays under it."),
]
ModeOption = Annotated[
    str,
    typer.Option("--mode", help="command (a process per event) or http (the gateway)."),
]
UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        help="The gateway in http mode: its base URL (default http://127.0.0.1:8787) or its "
        "full /v1/hooks/<cli> endpoint.",
    ),
]
EventsOption = Annotated[
    list[str] | None,
    typer.Option("--events", help="Only these events (repeat the option); default: all."),
]
CommandOption = Annotated[
    str | None,
    typer.Option("--command", help="How the entries call hookbus (default: this install's path)."),
]


ForceOption = Annotated[
    bool,
    typer.Option("--force", help="Install even where this CLI's version would fail open (warned)."),
]


def refuse_fails_open(row: Adapter, force: bool) -> None:
    """Refuse (or with ``force`` warn) when the CLI found on PATH would let guarded calls
    run whenever hookbus cannot start."""
    from hookbus.errors import FailsOpenInstall
    from hookbus.harnesses.doctor import version_fails_open

    found = version_fails_open(row, os.environ)
    if found is None:
        return
    problem = FailsOpenInstall(row.label, *found, row.on_failure_since or "")
    if not force:
        raise problem
    typer.echo(f"WARNING: {problem.risk}; installing anyway (--force)", err=True)


def installer_of(row: Adapter) -> Installer:
    """The installer of an adapter row."""
    found: Installer = importlib.import_module(row.installer).INSTALLER
    return found


def run_hook(
    ctx: typer.Context, answer: Callable[[list[str], dict[str, Any]], int | None], timeout: float
) -> None:
    """Run an adapter's lean hook command with the global options typer parsed."""
    cli = state(ctx)
    options = dict(cli.overrides, config=cli.config_file)
    code = answer(["--timeout", str(timeout)], options)
    raise typer.Exit(code or 0)


def target(installer: Installer, scope: str, settings: Path | None, root: Path | None) -> Path:
    """The file an install edits: ``--settings``, else the scope's file."""
    if settings is not None:
        return settings
    if scope not in installer.scopes:
        raise typer.BadParameter("must be " + " or ".join(installer.scopes), param_hint="--scope")
    if root is not None and scope != MANAGED:
        raise typer.BadParameter("only with --scope managed", param_hint="--root")
    return installer.settings_path(scope, root)


def install_choices(mode: str, url: str | None, events: Iterable[str] | None) -> list[str] | None:
    """Check ``--mode`` / ``--url`` and split ``--events`` (repeated or comma-separated)."""
    if mode not in ("command", "http"):
        raise typer.BadParameter("must be command or http", param_hint="--mode")
    if url is not None and mode != "http":
        raise typer.BadParameter("only with --mode http", param_hint="--url")
    return [e for item in events or [] for e in item.split(",") if e] or None


def report(
    ctx: typer.Context,
    outcome: Outcome,
    json_flag: bool,
    dry_run: bool,
    verb: str,
    verbose: bool = False,
) -> None:
    """Print what an install or uninstall changed: one summary line (after the diff of
    each file with ``--verbose`` or ``--dry-run``), or JSON."""
    changes = outcome.changes
    main = changes[0]
    if "warning" in outcome.extra:
        typer.echo(f"WARNING: {outcome.extra['warning']}", err=True)
    if want_json(ctx, json_flag):
        print_json(
            {
                "settings": str(main.path),
                **outcome.extra,
                "changed": any(c.changed for c in changes),
                "written": any(c.changed for c in changes) and not dry_run,
                "added": list(main.added),
                "removed": list(main.removed),
                "diff": "".join(c.diff() for c in changes),
            }
        )
        return
    if dry_run or verbose:
        typer.echo("".join(c.diff() for c in changes), nl=False)
    typer.echo(summary(outcome, verb, dry_run))


def summary(outcome: Outcome, verb: str, dry_run: bool) -> str:
    """The one line an install or uninstall prints: what changed in which file, and where
    the copy of the file from before hookbus's first change is kept."""
    main = outcome.changes[0]
    written = [c for c in outcome.changes if c.changed]
    if not written:
        return f"{main.path}: already {verb}; nothing to change"
    counts = f"{len(main.added)} event(s) added, {len(main.removed)} removed"
    files = " and ".join(str(c.path) for c in written)
    where = f"{'from' if verb == 'uninstalled' else 'into'} {files} ({counts})"
    if dry_run:
        return f"dry run: would have {verb} hookbus {where}; nothing written"
    line = f"{verb} hookbus {where}"
    kept = [
        str(backup_path(c.path))
        for c in written
        if c.before is not None and backup_path(c.path).exists()
    ]
    if kept:
        line += "; the file as it was before hookbus: " + ", ".join(kept)
    return line


def _extra_parameters(options: Sequence[ExtraOption]) -> list[inspect.Parameter]:
    params = []
    for option in options:
        # every extra option defaults to None: "not given" (a bool one is --x/--no-x)
        kind: Any = option.kind | None
        info = typer.Option(option.flag, help=option.help)
        params.append(
            inspect.Parameter(
                option.name,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=Annotated[kind, info],
                default=None,
            )
        )
    return params


def _with_signature(
    fn: Callable[..., None], common: list[inspect.Parameter], extra: list[inspect.Parameter]
) -> Callable[..., None]:
    """``fn`` as typer should see it: the common options, then the installer's own."""
    params = [
        inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context),
        *common,
        *extra,
        inspect.Parameter(
            "dry_run", inspect.Parameter.KEYWORD_ONLY, annotation=DryRunOption, default=False
        ),
        inspect.Parameter(
            "verbose", inspect.Parameter.KEYWORD_ONLY, annotation=VerboseOption, default=False
        ),
        inspect.Parameter(
            "json_flag", inspect.Parameter.KEYWORD_ONLY, annotation=JsonOption, default=False
        ),
    ]
    fn.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    fn.__annotations__ = {p.name: p.annotation for p in params}
    return fn


def _keyword(name: str, annotation: Any, default: Any) -> inspect.Parameter:
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default
    )


def build_group(name: str) -> typer.Typer:
    """The ``hookbus <name>`` command group of one adapter row."""
    row = adapter(name)
    installer = installer_of(row)
    scope_option = Annotated[str, typer.Option("--scope", help=installer.scope_help())]
    app = typer.Typer(
        help=f"{row.label} on the fleet: the hook command and its {installer.file_kind} installer.",
        no_args_is_help=True,
    )

    def hook(ctx: typer.Context, timeout: TimeoutOption = 60.0) -> None:
        run_hook(ctx, lambda argv, options: hook_entry(name, argv, options), timeout)

    hook.__doc__ = (
        f"Answer one {row.label} hook event: its JSON on stdin, {row.label}'s answer on stdout."
        "\n\nObserve-only events are published and the command returns at once; blocking "
        "ones wait for the fleet's decision. When the bus cannot answer, guards deny and "
        "the rest pass."
    )
    app.command("hook")(hook)

    def install(ctx: typer.Context, **kw: Any) -> None:
        refuse_fails_open(row, kw.pop("force"))
        mode = kw.pop("mode")
        chosen = install_choices(mode, kw["url"], kw.pop("events"))
        dry_run, json_flag, verbose = kw.pop("dry_run"), kw.pop("json_flag"), kw.pop("verbose")
        scope, settings, root = kw.pop("scope"), kw.pop("settings"), kw.pop("root")
        path = target(installer, scope, settings, root)
        outcome = installer.install(
            path,
            scope=None if settings is not None else scope,
            root=root,
            events=chosen,
            dry_run=dry_run,
            mode=mode,
            **kw,
        )
        report(ctx, outcome, json_flag, dry_run, "installed", verbose)

    install.__doc__ = (
        f"Merge hookbus's hook entries into {row.label}'s {installer.file_kind} (idempotent)."
    )
    common = [
        _keyword("scope", scope_option, "user"),
        _keyword("settings", SettingsOption, None),
        _keyword("root", RootOption, None),
        _keyword("mode", ModeOption, "command"),
        _keyword("url", UrlOption, None),
        _keyword("events", EventsOption, None),
        _keyword("command", CommandOption, None),
        _keyword("force", ForceOption, False),
    ]
    app.command("install")(
        _with_signature(install, common, _extra_parameters(installer.options_for("install")))
    )

    def uninstall(ctx: typer.Context, **kw: Any) -> None:
        dry_run, json_flag, verbose = kw.pop("dry_run"), kw.pop("json_flag"), kw.pop("verbose")
        scope, settings, root = kw.pop("scope"), kw.pop("settings"), kw.pop("root")
        path = target(installer, scope, settings, root)
        outcome = installer.uninstall(
            path, scope=None if settings is not None else scope, root=root, dry_run=dry_run, **kw
        )
        report(ctx, outcome, json_flag, dry_run, "uninstalled", verbose)

    uninstall.__doc__ = "Remove exactly the hook entries hookbus added; everything else stays."
    app.command("uninstall")(
        _with_signature(
            uninstall, common[:3], _extra_parameters(installer.options_for("uninstall"))
        )
    )
    return app


_built: dict[str, typer.Typer] = {}


def __getattr__(name: str) -> typer.Typer:
    """``groups.<cli>``: the command group of that row, built on first use."""
    if name not in ADAPTER_MODULES:
        raise AttributeError(name)
    if name not in _built:
        _built[name] = build_group(name)
    return _built[name]
