"""``hookbus hooks ...``: list, info, validate, create, enable, disable, run (whose work is
:mod:`hookbus.cli.hooks.run`).

Each command works on ``--hooks-dir`` or the configured hooks folder (``hooks_dir`` in
hookbus.toml, ``HOOKBUS_HOOKS_DIR``) and prints JSON with ``--json``. Exit codes: 0 ok,
1 an error or an invalid hook (``validate`` found a problem, ``run``'s hook failed),
2 ``run``'s hook said deny / ask / halt.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from hookbus.authoring.pending import list_pending
from hookbus.authoring.write import hooks_dir_flag
from hookbus.cli.support import (
    EXIT_ERROR,
    Column,
    console,
    err_console,
    fail,
    print_fields,
    print_json,
    print_table,
    state,
    want_json,
)
from hookbus.hooks.describe import (
    handler_path,
    info_rows,
    manifest_dict,
)
from hookbus.hooks.loader import (
    Problem,
    deadline_warnings,
    handler_problems,
    load_hooks,
    validate_path,
)
from hookbus.hooks.manifest import load_manifest

__all__ = ["app"]

app = typer.Typer(
    help="Inspect, validate, scaffold and try hooks in a hooks folder.", no_args_is_help=True
)

DirOption = Annotated[
    Path | None,
    typer.Option(
        "--hooks-dir",
        "-d",
        "--dir",
        help="Hooks folder (default: hooks_dir from the config).",
        envvar="HOOKBUS_HOOKS_DIR",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable JSON output.")]

#: The columns of ``hooks list``: a hook's id and action kind are never broken.
HOOK_COLUMNS = (
    Column("id", keep=True),
    Column("events"),
    Column("prio", justify="right"),
    Column("enabled"),
    Column("blocking"),
    Column("action", keep=True),
    Column("match"),
)


def _dir(ctx: typer.Context, given: Path | None) -> Path:
    return given if given is not None else Path(state(ctx).local_settings().hooks_dir)


def _catalogue(ctx: typer.Context) -> Any:
    return state(ctx).local_settings().catalogue()


def _registry(ctx: typer.Context, *, local: bool = False) -> Any:
    """The registry a command runs hooks in; ``local`` for one that only loads them
    (``validate``), which a stopped ``hookbus dev`` does not refuse."""
    from hookbus.hooks.registry import HookRegistry

    cli = state(ctx)
    return HookRegistry.from_settings(cli.local_settings() if local else cli.settings())


def _problem_dict(problem: Problem) -> dict[str, Any]:
    return {
        "path": problem.path,
        "field": problem.field,
        "reason": problem.reason,
        "hook": problem.hook,
        "message": str(problem),
    }


def _print_problems(problems: list[Problem]) -> None:
    if problems:
        err_console.print(f"[bold red]{len(problems)} problem(s):[/]")
        for problem in problems:
            err_console.print(
                f"  [red]✗[/] {escape(str(problem))}", highlight=False, soft_wrap=True
            )


def _print_warnings(warnings: list[Problem]) -> None:
    for warning in warnings:
        err_console.print(
            f"  [yellow]warning:[/] {escape(str(warning))}", highlight=False, soft_wrap=True
        )


def _deadline_warnings(ctx: typer.Context, hooks: list[Any]) -> list[Problem]:
    """Blocking hooks whose timeout outlasts their kinds' deadlines: each slow run would be cut
    off and answered by its on_error, so ``validate`` says so."""
    settings = state(ctx).local_settings()
    return deadline_warnings(hooks, settings.deadline_ms, settings.catalogue())


@app.command("list")
def list_hooks(
    ctx: typer.Context, hooks_dir: DirOption = None, json_flag: JsonOption = False
) -> None:
    """A table of the hooks in the folder (id, events, priority, enabled, blocking, action,
    match), the problems below it."""
    folder = _dir(ctx, hooks_dir)
    if not folder.is_dir():
        fail(
            f"hooks folder {folder} does not exist "
            "(pass --hooks-dir, or set hooks_dir in hookbus.toml)"
        )
    report = load_hooks(folder, catalogue=_catalogue(ctx))
    report.warnings = _deadline_warnings(ctx, report.hooks)
    bypasses = _bypasses(ctx, folder)
    pending = list_pending(folder)
    if want_json(ctx, json_flag):
        print_json(
            {
                "hooks_dir": str(folder),
                "hooks": [manifest_dict(h) for h in report.hooks],
                "pending": [{"name": p.name, "author": p.author} for p in pending],
                "problems": [_problem_dict(p) for p in report.problems],
                "warnings": [_problem_dict(w) for w in report.warnings],
                "bypasses": bypasses,
            }
        )
        return
    from rich.text import Text

    ordered = sorted(report.hooks, key=lambda h: (h.priority, h.name))
    rows = [
        (
            hook.name,
            ", ".join(hook.events),
            str(hook.priority),
            ("shadow" if hook.mode == "shadow" else "true")
            if hook.enabled
            else Text("false", style="dim"),
            {True: "true", False: "false", None: "default"}[hook.blocking],
            hook.action.kind,
            hook.match.summary(),
        )
        for hook in ordered
    ]
    if rows:
        print_table(f"hooks in {folder}", HOOK_COLUMNS, rows)
    else:
        console.print(f"no hooks in {folder}", markup=False)
    for hook_name, notes in sorted(bypasses.items()):
        for note in notes:
            console.print(
                f"[yellow]audit bypass[/] {escape(hook_name or str(folder))}: {escape(note)}",
                highlight=False,
                soft_wrap=True,
            )
    for waiting in pending:
        console.print(
            f"pending {waiting.name} (by {waiting.author}): not loaded until "
            f"`hookbus hooks approve {waiting.name}{hooks_dir_flag(folder)}`",
            markup=False,
            highlight=False,
        )
    _print_warnings(report.warnings)
    _print_problems(report.problems)


def _bypasses(ctx: typer.Context, folder: Path) -> dict[str, list[str]]:
    """Security-audit bypasses that set findings aside, by hook: shown so that nobody runs a
    hook the audit would have refused without seeing it."""
    if not folder.exists():
        return {}
    from hookbus.audit.folder import audit_folder

    return audit_folder(folder, settings=state(ctx).settings()).bypasses_by_hook()


@app.command("info")
def info(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The hook's name.")],
    hooks_dir: DirOption = None,
    json_flag: JsonOption = False,
) -> None:
    """Everything about one hook, including its resolved handler."""
    from hookbus.authoring.manifest_edit import find_manifest

    folder = _dir(ctx, hooks_dir)
    catalogue = _catalogue(ctx)
    path = find_manifest(folder, name, catalogue=catalogue)
    manifest = load_manifest(path, catalogue=catalogue)
    settings = state(ctx).settings()
    handler = handler_path(manifest, settings.security.env_allowlist)
    from hookbus.hooks.loader import unmet_requirements

    unmet = unmet_requirements(manifest)
    problems = [str(p) for p in handler_problems(manifest)]
    if want_json(ctx, json_flag):
        data = manifest_dict(manifest)
        data.update(handler=handler, unmet_requirements=unmet, problems=problems)
        print_json(data)
        return
    print_fields(info_rows(manifest, handler))
    for text in unmet:
        err_console.print(f"[yellow]requirement not met:[/] {escape(text)}", highlight=False)
    for text in problems:
        err_console.print(f"[red]problem:[/] {escape(text)}", highlight=False)


@app.command("validate")
def validate(
    ctx: typer.Context,
    path: Annotated[
        Path | None,
        typer.Argument(
            help="A hooks folder, one hook's folder or one manifest (default: --hooks-dir)."
        ),
    ] = None,
    hooks_dir: DirOption = None,
    json_flag: JsonOption = False,
) -> None:
    """Check manifests and handlers (python handlers are imported); exit 1 and list every
    problem when anything is wrong."""
    target = path if path is not None else _dir(ctx, hooks_dir)
    catalogue = _catalogue(ctx)
    if not target.exists():
        fail(f"{target} does not exist")
    report = validate_path(target, catalogue)
    registry = _registry(ctx, local=True)
    for error in registry.replace_dynamic(report.hooks):
        manifest = report.get(error.hook_id)
        report.problems.append(
            Problem(
                str(manifest.source_path) if manifest else str(target),
                "action",
                error.reason,
                error.hook_id,
            )
        )
    bad = {p.hook for p in report.problems}
    valid = [h for h in report.hooks if h.name not in bad]
    report.warnings = _deadline_warnings(ctx, valid)
    if want_json(ctx, json_flag):
        print_json(
            {
                "ok": report.ok,
                "hooks": [h.name for h in valid],
                "problems": [_problem_dict(p) for p in report.problems],
                "warnings": [_problem_dict(w) for w in report.warnings],
            }
        )
    else:
        for hook in valid:
            console.print(
                f"[green]✓[/] {hook.name} ({escape(str(hook.source_path))})", highlight=False
            )
        _print_warnings(report.warnings)
        _print_problems(report.problems)
        if report.ok:
            console.print(f"[green]{len(valid)} hook(s) valid[/]")
    if not report.ok:
        raise typer.Exit(EXIT_ERROR)


@app.command("create")
def create_command(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Name of the new hook (its folder name).")],
    event: Annotated[str, typer.Option("--event", "-e", help="Event kind, e.g. PreToolUse.")],
    action: Annotated[
        str,
        typer.Option(
            "--action", "-a", help="The action kind to scaffold (a wrong one lists them all)."
        ),
    ] = "shell",
    priority: Annotated[int, typer.Option("--priority", help="Lower runs first.")] = 100,
    hooks_dir: DirOption = None,
    json_flag: JsonOption = False,
) -> None:
    """Scaffold a hook that validates as created, with a handler stub that runs; refuses
    to overwrite."""
    from hookbus.cli.hooks.edit import create

    create(ctx, name, event, action, priority, hooks_dir, json_flag)


@app.command("enable")
def enable(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The hook's name.")],
    hooks_dir: DirOption = None,
    json_flag: JsonOption = False,
) -> None:
    """Set ``enabled = true`` in the hook's manifest, keeping its comments and layout."""
    from hookbus.cli.hooks.edit import flip

    flip(ctx, name, hooks_dir, True, json_flag)


@app.command("disable")
def disable(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The hook's name.")],
    hooks_dir: DirOption = None,
    json_flag: JsonOption = False,
) -> None:
    """Set ``enabled = false`` in the hook's manifest, keeping its comments and layout."""
    from hookbus.cli.hooks.edit import flip

    flip(ctx, name, hooks_dir, False, json_flag)


@app.command("run")
def run(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The hook's name.")],
    event_source: Annotated[
        str, typer.Option("--event", "-e", help="Event JSON file, or - for stdin.")
    ] = "-",
    kind: Annotated[
        str | None, typer.Option("--kind", "-k", help="Event kind when the JSON has none.")
    ] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Seconds the hook may take.")
    ] = None,
    hooks_dir: DirOption = None,
    json_flag: JsonOption = False,
) -> None:
    """Run one hook against one event and print its result and trace entry (also for a
    disabled hook). Exit 0 continue, 2 deny/ask/halt, 1 the hook failed."""
    from hookbus.cli.hooks.run import run_hook

    run_hook(ctx, name, event_source, kind, timeout, hooks_dir, json_flag)
