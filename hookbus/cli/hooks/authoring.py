"""``hookbus hooks audit`` and ``hookbus hooks write``: thin shells over the audit and
:func:`~hookbus.authoring.write.write_hook`.

Exit codes: ``audit`` exits 1 when there is a critical finding (what ``hookbus reload``
would refuse), else 0. ``write`` exits 0 when the hook was written, 2 when the policy or
the audit refused it (or it exists), 1 when the spec is invalid or the write failed; with
``--json`` every outcome is one JSON document on stdout (``ok``, ``reason``, ``code``,
``findings``, ``bypasses``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from hookbus.audit.autonomy import AutonomyPolicy
from hookbus.audit.folder import AuditReport, audit_folder
from hookbus.authoring.pending import approve_pending, list_pending, reject_pending
from hookbus.authoring.write import WriteResult, hooks_dir_flag, write_hook
from hookbus.bus.ids import AGENT_ID_ENV
from hookbus.cli.support import (
    EXIT_DENIED,
    EXIT_ERROR,
    EXIT_OK,
    Column,
    console,
    err_console,
    print_json,
    print_table,
    state,
    want_json,
)
from hookbus.errors import ApprovalUnconfirmed, HookBusError, HookNotFound

#: WriteResult codes that are errors (exit 1), not refusals by the policy or the audit (exit 2).
_ERROR_CODES = ("invalid", "io-error")

_SEVERITY_STYLE = {"critical": "bold red", "high": "red", "medium": "yellow", "low": "dim"}


#: The columns of ``hooks audit``: the rule and the file:line are never broken.
_AUDIT_COLUMNS = (
    Column("severity", keep=True),
    Column("rule", keep=True),
    Column("where", keep=True),
    Column("what to change"),
)


def _print_report(report: AuditReport, where: Path) -> None:
    from rich.text import Text

    if report.findings:
        rows = [
            (
                Text(f.severity, style=_SEVERITY_STYLE.get(f.severity, "")),
                f.rule,
                f"{f.file}:{f.line}" if f.line else f.file,
                f.message,
            )
            for f in report.findings
        ]
        print_table(f"audit of {where}", _AUDIT_COLUMNS, rows)
    for bypass in report.bypasses:
        err_console.print(
            f"[yellow]bypass:[/] {escape(bypass.hook or 'hook writing')}: {escape(bypass.what)} "
            f"({len(bypass.suppressed)} finding(s) set aside)",
            highlight=False,
            soft_wrap=True,
        )
    counts = report.to_dict()["counts"]
    summary = ", ".join(f"{n} {sev}" for sev, n in counts.items() if n) or "no findings"
    verdict = "[bold red]refused by reload[/]" if report.critical else "[green]ok[/]"
    console.print(f"{len(report.hooks)} hook(s) audited: {summary}: {verdict}")


def audit(
    ctx: typer.Context,
    path: Annotated[
        Path | None,
        typer.Argument(
            help="Hooks folder, one hook folder, or one <name>.yaml (default: hooks_dir)."
        ),
    ] = None,
    json_flag: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """Audit hooks for dangerous shell, escaping paths, symlinks, secrets and policy breaks.

    Exits 1 when any finding is critical (what `hookbus reload` refuses)."""
    settings = state(ctx).settings()
    where = path if path is not None else Path(settings.hooks_dir)
    as_json = want_json(ctx, json_flag)
    if not where.exists() and not where.is_symlink():
        if as_json:
            print_json({"ok": False, "reason": f"{where} does not exist", "findings": []})
        else:
            err_console.print(
                f"[bold red]error:[/] {escape(str(where))} does not exist "
                "(pass a PATH or set hooks_dir)",
                highlight=False,
                soft_wrap=True,
            )
        raise typer.Exit(EXIT_ERROR)
    report = audit_folder(where, settings=settings)
    if as_json:
        data = report.to_dict()
        data["path"] = str(where)
        print_json(data)
    else:
        _print_report(report, where)
    raise typer.Exit(EXIT_ERROR if report.critical else EXIT_OK)


def _read_spec(spec_file: Path | None) -> Any:
    if spec_file is None or str(spec_file) == "-":
        if sys.stdin.isatty():
            raise ValueError("give --spec FILE or pipe a JSON spec on stdin")
        text = sys.stdin.read()
        origin = "stdin"
    else:
        try:
            text = spec_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"cannot read {spec_file}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise ValueError(f"cannot read {spec_file}: not UTF-8 text") from None
        origin = str(spec_file)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the spec on {origin} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"the spec on {origin} must be a JSON object")
    return data


def _print_write(result: WriteResult) -> None:
    for f in result.findings:
        style = _SEVERITY_STYLE.get(f.severity, "")
        loc = f"{f.file}:{f.line}" if f.line else f.file
        err_console.print(
            f"  [{style}]{f.severity}[/] {f.rule} {escape(loc)}: {escape(f.message)}",
            highlight=False,
            soft_wrap=True,
        )
    for b in result.bypasses:
        err_console.print(f"[yellow]bypass:[/] {escape(b.what)}", highlight=False, soft_wrap=True)
    if result.ok:
        console.print(f"{result.reason}: {result.path} ({', '.join(result.files)})")
    else:
        label = "error" if result.code in _ERROR_CODES else "refused"
        err_console.print(
            f"[bold red]{label}:[/] {escape(result.reason)}", highlight=False, soft_wrap=True
        )


def write(
    ctx: typer.Context,
    spec_file: Annotated[
        Path | None,
        typer.Option("--spec", help="JSON spec file ('-' or none: read stdin)."),
    ] = None,
    hooks_dir: Annotated[
        Path | None,
        typer.Option(
            "--hooks-dir",
            "-d",
            "--dir",
            help="Hooks folder to write into (default: hooks_dir from config).",
            envvar="HOOKBUS_HOOKS_DIR",
        ),
    ] = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="Overwrite a hook of the same name.")
    ] = False,
    author: Annotated[
        str,
        typer.Option(
            "--author",
            help="The writing agent's id (recorded as agent:<id>; it may replace only its own "
            "hooks).",
            envvar=AGENT_ID_ENV,
        ),
    ] = "cli",
    json_flag: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """Write a hook from a JSON spec, after the autonomy policy and the audit allow it.

    The spec: {"name", "description", "events", "priority", "match", "action": {"command"},
    {"script", "language": "sh"|"bash"|"python"} or {"http": {"url", "method", "headers"}}}.
    Under autonomy.level supervised (the default) the hook waits in .pending/ until an
    operator runs `hookbus hooks approve NAME`. Never reloads.
    Exits 2 when refused (policy, audit, ownership, exists), 1 when the spec is invalid."""
    settings = state(ctx).settings()
    as_json = want_json(ctx, json_flag)
    folder = hooks_dir if hooks_dir is not None else Path(settings.hooks_dir)
    try:
        spec = _read_spec(spec_file)
    except ValueError as exc:
        result = WriteResult(ok=False, name=None, reason=str(exc), code="invalid")
    else:
        result = write_hook(
            spec,
            hooks_dir=folder,
            policy=AutonomyPolicy.from_settings(settings),
            replace=replace,
            author=author,
        )
    if result.ok and result.name and result.path:
        from hookbus.authoring.release import hook_digest, record_change

        digest = hook_digest(Path(result.path))
        record_change(
            settings, action="write", actor=result.author, hook=result.name, sha256=digest
        )
    if as_json:
        print_json(result.to_dict())
    else:
        _print_write(result)
    if result.ok:
        raise typer.Exit(EXIT_OK)
    raise typer.Exit(EXIT_ERROR if result.code in _ERROR_CODES else EXIT_DENIED)


DirOption = Annotated[
    Path | None,
    typer.Option(
        "--hooks-dir",
        "-d",
        "--dir",
        help="Hooks folder (default: hooks_dir from config).",
        envvar="HOOKBUS_HOOKS_DIR",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="JSON output.")]
NameArgument = Annotated[str, typer.Argument(help="The pending hook's name.")]


def _decide(
    ctx: typer.Context,
    name: str,
    hooks_dir: Path | None,
    json_flag: bool,
    *,
    approve: bool,
    scope: list[str] | None = None,
    digest: str | None = None,
) -> None:
    settings = state(ctx).settings()
    folder = hooks_dir if hooks_dir is not None else Path(settings.hooks_dir)
    word = "approved" if approve else "rejected"
    widened = list(scope or [])
    try:
        if approve:
            shown = digest if digest is not None else _confirmed_digest(folder, name)
            hook = approve_pending(folder, name, scope=widened, expect_sha256=shown)
        else:
            hook = reject_pending(folder, name)
    except HookBusError as exc:
        if want_json(ctx, json_flag):
            print_json({"ok": False, "name": name, "reason": str(exc)})
        else:
            err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(EXIT_ERROR) from None
    from hookbus.authoring.release import record_change  # every write goes on the history

    verb = "approve" if approve else "reject"
    extra: dict[str, object] | None = {"scope": widened} if widened else None
    record_change(settings, action=verb, actor=None, hook=name, sha256=hook.sha256, extra=extra)
    reach = _reach(hook.author, widened) if approve else ""
    if want_json(ctx, json_flag):
        print_json(
            {
                "ok": True,
                "name": name,
                word: True,
                "author": hook.author,
                "sha256": hook.sha256,
                "scope": widened,
                "acts_on": reach,
            }
        )
        return
    then = f"; run `hookbus reload{hooks_dir_flag(folder)}` to publish it" if approve else ""
    acts = f"; acts on {reach}" if reach else ""
    console.print(
        f"{word} {name} (written by {hook.author}, sha256 {hook.sha256[:12]}){acts}{then}",
        markup=False,
        highlight=False,
    )


def _reach(author: str, scope: list[str]) -> str:
    """Whose events an approved hook acts on, in words."""
    if not author.startswith("agent:"):
        return "every agent's events"
    own = author.removeprefix("agent:")
    if "*" in scope:
        return "every agent's events (scope widened to '*')"
    if scope:
        return f"the events of {', '.join([own, *scope])} (scope widened)"
    return f"its author {own}'s events only"


ScopeOption = Annotated[
    list[str] | None,
    typer.Option(
        "--scope",
        help="Let an agent's hook act on this agent's events too ('*': every agent's); "
        "repeatable. Without it the hook acts on its author's events only.",
    ),
]


def _confirmed_digest(folder: Path, name: str) -> str:
    """The digest of the pending copy shown to the operator and confirmed at a terminal;
    without a terminal nothing was shown, so the approval is refused."""
    found = [h for h in list_pending(folder) if h.name == name]
    if not found:
        raise HookNotFound(name, f"the pending hooks of {folder}")
    hook = found[0]
    if not sys.stdin.isatty():
        raise ApprovalUnconfirmed(
            f"say which copy of {name} you read: `hookbus hooks approve {name} --digest "
            f"{hook.sha256[:12]}` (the sha256 `hookbus hooks pending` prints); approving by "
            "name alone could approve a copy swapped in after you read it"
        )
    console.print(
        f"pending {name} by {hook.author}, sha256 {hook.sha256}", markup=False, highlight=False
    )
    if not typer.confirm(f"approve this copy of {name}?", default=False):
        raise ApprovalUnconfirmed("not approved")
    return hook.sha256


DigestOption = Annotated[
    str | None,
    typer.Option(
        "--digest",
        help="The sha256 of the pending copy you read (from `hookbus hooks pending`; 12 "
        "hex digits or more): any other copy is refused. Without it the CLI asks at a "
        "terminal and refuses elsewhere.",
    ),
]


def approve(
    ctx: typer.Context,
    name: NameArgument,
    hooks_dir: DirOption = None,
    json_flag: JsonOption = False,
    scope: ScopeOption = None,
    digest: DigestOption = None,
) -> None:
    """Approve the pending agent-written hook you read (--digest): it moves into the hooks
    folder (the next `hookbus reload` publishes it); it acts on its author's events only
    unless --scope widens it (recorded in the history). Exits 1 when no such pending hook
    exists or it is not the copy you read."""
    _decide(ctx, name, hooks_dir, json_flag, approve=True, scope=scope, digest=digest)


def reject(
    ctx: typer.Context,
    name: NameArgument,
    hooks_dir: DirOption = None,
    json_flag: JsonOption = False,
) -> None:
    """Reject a pending agent-written hook: it is deleted; an approved version stays."""
    _decide(ctx, name, hooks_dir, json_flag, approve=False)


def pending(ctx: typer.Context, hooks_dir: DirOption = None, json_flag: JsonOption = False) -> None:
    """List the agent-written hooks waiting for approval, each with the audit's findings and
    whose events it would act on: what the operator approves."""
    from hookbus.audit.folder import audit_folder
    from hookbus.authoring.pending import pending_dir

    settings = state(ctx).settings()
    folder = hooks_dir if hooks_dir is not None else Path(settings.hooks_dir)
    waiting = list_pending(folder)
    report = audit_folder(pending_dir(folder), settings=settings) if waiting else None
    findings = {h.name: report.for_hook(h.name) if report else [] for h in waiting}
    if want_json(ctx, json_flag):
        print_json(
            {
                "hooks_dir": str(folder),
                "pending": [
                    {
                        "name": h.name,
                        "author": h.author,
                        "sha256": h.sha256,
                        "path": str(h.path),
                        "acts_on": _reach(h.author, []),
                        "findings": [f.to_dict() for f in findings[h.name]],
                    }
                    for h in waiting
                ],
            }
        )
        return
    if not waiting:
        console.print(f"no pending hooks in {folder}", markup=False, highlight=False)
    for hook in waiting:
        found = findings[hook.name]
        console.print(
            f"pending {hook.name} (by {hook.author}, sha256 {hook.sha256}): {len(found)} "
            f"finding(s); would act on {_reach(hook.author, [])}",
            markup=False,
            highlight=False,
        )
        for f in found:
            where = f"{f.file}:{f.line}" if f.line else f.file
            console.print(
                f"  {f.severity} {f.rule} {where}: {f.message}", markup=False, highlight=False
            )
