"""``hookbus reload`` and ``hookbus status``: push hooks to the fleet, and see the fleet.

Thin shells over :mod:`hookbus.authoring.release`, :mod:`hookbus.bundles.store` and
:mod:`hookbus.workers.fleet.status`.
Exit codes: 0 done (or nothing to do), 1 refused / error / a live worker did not switch in
time, 2 bad usage.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.markup import escape

from hookbus.cli.support import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    Column,
    console,
    err_console,
    fail,
    print_json,
    print_table,
    state,
    want_json,
)
from hookbus.errors import BundleError, SecurityViolation

if TYPE_CHECKING:
    import redis

    from hookbus.bundles.store import HistoryEntry, PushResult
    from hookbus.bus.keys import Keys
    from hookbus.bus.settings.schema import Settings
    from hookbus.workers.reload.acks import Ack, AckReport


def _when(ms: int | None) -> str:
    if not ms:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def _age(ms: int) -> str:
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{seconds / 60:.1f}m"
    if seconds < 86400:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


def _push_dict(result: PushResult) -> dict[str, Any]:
    return {
        "version": result.version,
        "changed": result.changed,
        "previous": result.previous,
        "hooks": result.hooks,
        "problems": result.problems,
        "warnings": [{"hook": w.split(":", 1)[0], "message": w} for w in result.warnings],
        "audit": {
            "ran": result.audit.ran,
            "critical": result.audit.critical,
            "findings": result.audit.findings,
        },
        "pruned": result.pruned,
        "left_out": result.left_out,
        "pending": result.pending,
        "signed_by": result.signed_by or None,
    }


#: The columns of the reload's worker table: a worker id, host and version are never broken.
_ACK_COLUMNS = (
    Column("worker", keep=True),
    Column("role", keep=True),
    Column("host", keep=True),
    Column("version", keep=True),
    Column("hooks", justify="right"),
    Column("problems"),
    Column("ack", keep=True),
)
#: The columns of ``reload --history``: a version and its content hash are never broken.
_HISTORY_COLUMNS = (
    Column(""),
    Column("version", keep=True),
    Column("current since", keep=True),
    Column("who", keep=True),
    Column("hooks", justify="right"),
    Column("content hash", keep=True),
)


def _print_acks(report: AckReport) -> None:
    from rich.text import Text

    rows = []
    for ack in report.acks:
        w = ack.worker
        switched = ack.switched and ack.after_ms is not None
        rows.append(
            (
                w.id,
                w.role,
                w.host,
                w.version or "-",
                str(w.hooks),
                "\n".join(w.problems) or "-",
                f"{ack.after_ms:.0f} ms"
                if switched
                else Text("refused" if ack.refusal else "not switched", style="red"),
            )
        )
    print_table(f"workers on {report.version}", _ACK_COLUMNS, rows)


def _print_history(entries: list[HistoryEntry]) -> None:
    rows = [
        (
            "*" if e.current else "",
            e.version,
            _when(e.current_since_ms),
            (e.meta.who or "-") if e.meta else "-",
            str(e.meta.hook_count) if e.meta else "?",
            e.meta.content_hash[:24] if e.meta else "(missing)",
        )
        for e in entries
    ]
    print_table("hook bundles (newest first)", _HISTORY_COLUMNS, rows)


def reload(
    ctx: typer.Context,
    version: Annotated[
        str | None,
        typer.Argument(help="With --rollback: the version to make current (default: previous)."),
    ] = None,
    hooks_dir: Annotated[
        Path | None,
        typer.Option(
            "--hooks-dir",
            "-d",
            "--dir",
            help="Hooks folder to push (default: hooks_dir from config).",
            envvar="HOOKBUS_HOOKS_DIR",
        ),
    ] = None,
    wait: Annotated[
        float | None,
        typer.Option("--wait", "-w", help="Wait up to SECONDS for every live worker to ack."),
    ] = None,
    list_versions: Annotated[
        bool, typer.Option("--list", "-l", help="List recent bundle versions.")
    ] = False,
    rollback: Annotated[
        bool,
        typer.Option("--rollback", help="Make an earlier bundle current again (see VERSION)."),
    ] = False,
    allow_partial: Annotated[
        bool,
        typer.Option(
            "--allow-partial",
            help="Leave out hooks that fail to validate or load instead of refusing the "
            "folder (logged; a hook marked guard = true is never left out).",
        ),
    ] = False,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict", hidden=True, help="Refusing a folder with problems is the default."
        ),
    ] = False,
    who: Annotated[
        str | None, typer.Option("--who", help="Recorded as the pusher (default user@host).")
    ] = None,
    json_flag: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """Validate, audit and push the hooks folder to every worker (or list / roll back)."""
    from hookbus.authoring import release
    from hookbus.bus.connection import bus_client
    from hookbus.bus.keys import Keys

    as_json = want_json(ctx, json_flag)
    settings = state(ctx).settings()
    client = bus_client(settings)
    keys = Keys.for_namespace(settings.namespace)
    if version is not None and not rollback:
        fail(
            "VERSION is only taken with --rollback (hookbus reload --rollback VERSION)", EXIT_USAGE
        )
    if list_versions:
        if rollback:
            fail("--list and --rollback cannot be combined", EXIT_USAGE)
        _list_versions(client, keys, settings, as_json)
        return
    try:
        if rollback:
            result = release.rollback(client, settings, version, who=who)
        else:
            folder = hooks_dir if hooks_dir is not None else Path(settings.hooks_dir)
            result = release.release_folder(
                client, settings, folder, who=who, allow_partial=allow_partial and not strict
            )
    except SecurityViolation as exc:
        _refused(str(exc), [str(f) for f in exc.findings], as_json)
    except BundleError as exc:
        _refused(str(exc), [], as_json)
    data = _push_dict(result)
    if not as_json:
        _print_push(result, rollback=rollback)
    code = EXIT_OK
    report: AckReport | None = None
    if wait is not None:
        report = _wait(client, settings, result.version, wait, as_json)
        data["acks"] = [a.to_dict() for a in report.acks]
        data["ok"] = report.ok
        if not report.ok:
            code = EXIT_ERROR
    if as_json:
        print_json(data)
    if code != EXIT_OK:
        if not as_json and report is not None:
            _print_failures(report)
        raise typer.Exit(code)


def _print_failures(report: AckReport) -> None:
    failures = report.failures()
    for line in failures:
        err_console.print(f"  {escape(line)}", highlight=False, soft_wrap=True)
    err_console.print(
        f"[bold red]error:[/] the reload did not take on {len(failures)} live worker(s): "
        "see above; they answer from their previous hooks (or degraded)"
    )


def _list_versions(client: redis.Redis, keys: Keys, settings: Settings, as_json: bool) -> None:
    from hookbus.bundles import store

    entries = store.history(client, keys, limit=max(settings.reload.bundle_history, 1))
    if as_json:
        print_json(
            [
                {
                    "version": e.version,
                    "current": e.current,
                    "current_since_ms": e.current_since_ms,
                    "who": e.meta.who if e.meta else None,
                    "created_ms": e.meta.created_ms if e.meta else None,
                    "hooks": e.meta.hook_count if e.meta else None,
                    "content_hash": e.meta.content_hash if e.meta else None,
                }
                for e in entries
            ]
        )
    elif not entries:
        console.print("no bundle pushed yet (run `hookbus reload`)")
    else:
        _print_history(entries)


def _refused(message: str, findings: list[str], as_json: bool) -> NoReturn:
    if as_json:
        print_json({"ok": False, "refused": True, "reason": message, "findings": findings})
        raise typer.Exit(EXIT_ERROR)
    for line in findings:
        err_console.print(f"  {escape(line)}", highlight=False, soft_wrap=True)
    fail(f"refused: {message}")


def _print_push(result: PushResult, *, rollback: bool) -> None:
    # an unsigned push is logged loudly by the release itself (UNSIGNED MODE: ...)
    for name in result.pending:
        err_console.print(
            f"[yellow]pending:[/] {escape(name)} left out until an operator runs "
            f"`hookbus hooks approve {escape(name)}`",
            highlight=False,
            soft_wrap=True,
        )
    for entry in result.left_out:
        err_console.print(
            f"[yellow]left out (--allow-partial):[/] {escape(entry)}",
            highlight=False,
            soft_wrap=True,
        )
    for problem in result.problems:
        err_console.print(
            f"[yellow]warning:[/] {escape(str(problem))}", highlight=False, soft_wrap=True
        )
    for warning in result.warnings:
        err_console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)
    for finding in result.audit.findings:
        err_console.print(
            f"[yellow]audit:[/] {escape(str(finding))}", highlight=False, soft_wrap=True
        )
    if not result.changed:
        console.print(f"bundle {result.version} is already current; nothing to do")
        return
    verb = "rolled back to" if rollback else "pushed"
    was = f" (was {result.previous})" if result.previous else ""
    console.print(f"{verb} bundle {result.version}{was}: {len(result.hooks)} hooks")


def _wait(
    client: redis.Redis, settings: Settings, version: str, timeout_s: float, as_json: bool
) -> AckReport:
    from hookbus.workers.reload.acks import wait_for_acks

    def on_ack(ack: Ack) -> None:
        if not as_json:
            w = ack.worker
            problems = f", {len(w.problems)} problem(s)" if w.problems else ""
            console.print(
                f"  ack {w.id} ({w.role}@{w.host}) after {ack.after_ms:.0f} ms: "
                f"{w.hooks} hooks{problems}",
                highlight=False,
            )

    report = wait_for_acks(client, settings, version, timeout_s=timeout_s, on_ack=on_ack)
    if not as_json:
        if report.acks:
            _print_acks(report)
        else:
            console.print("no live workers to wait for")
    return report


# --- status -----------------------------------------------------------------------------
