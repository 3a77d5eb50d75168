"""``hookbus console``: serve the operator's web console (see :mod:`hookbus.console`).

The token comes from ``--tokens`` (one per operator), ``--token-file``, else
``HOOKBUS_CONSOLE_TOKEN``, else a fresh one printed as a login URL. It listens on loopback by
default; any other address needs a token file (a token on a command line or in an
environment shows in process listings; a generated one is printed to the scrollback).

Exit codes: 0 stopped, 64 usage (a non-loopback host without a token file, a short
token), 69 the port is taken (the holder named), 78 configuration.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from hookbus.cli import support
from hookbus.cli.ports import taken
from hookbus.cli.support import EXIT_UNAVAILABLE, EXIT_USAGE, fail, state

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings

#: Default port of the console (the gateway's is 8787).
DEFAULT_PORT = 8788


def console(
    ctx: typer.Context,
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on.", envvar="HOOKBUS_CONSOLE_HOST")
    ] = "127.0.0.1",
    port: Annotated[
        int,
        typer.Option("--port", min=1, max=65535, help="Port.", envvar="HOOKBUS_CONSOLE_PORT"),
    ] = DEFAULT_PORT,
    token_file: Annotated[
        Path | None,
        typer.Option(
            "--token-file",
            help="File holding the login token (required off loopback).",
            envvar="HOOKBUS_CONSOLE_TOKEN_FILE",
        ),
    ] = None,
    hooks_dir: Annotated[
        Path | None,
        typer.Option(
            "--hooks-dir",
            "-d",
            help="Hooks folder (default: hooks_dir).",
            envvar="HOOKBUS_HOOKS_DIR",
        ),
    ] = None,
    tokens_file: Annotated[
        Path | None,
        typer.Option(
            "--tokens",
            help="File of 'NAME TOKEN' lines: a token per operator, who decides as operator:NAME.",
            envvar="HOOKBUS_CONSOLE_TOKENS_FILE",
        ),
    ] = None,
    operator: Annotated[
        str | None,
        typer.Option(
            "--as",
            help="Who decides through this console (default: user@host).",
            envvar="HOOKBUS_OPERATOR",
        ),
    ] = None,
) -> None:
    """Serve the web console: overview, live decisions, approvals (Allow / Deny), hooks and
    agent-written hooks awaiting approval, dead letters; a JSON API under /api/."""
    from hookbus.approvals.inbox import operator_identity
    from hookbus.console.app import is_loopback, serve
    from hookbus.console.auth import ConsoleAuth

    settings = state(ctx).settings()
    if (busy := taken(host, port)) is not None:  # before printing a URL reaching its holder
        fail(f"{busy}: stop it, or pick another port with --port", EXIT_UNAVAILABLE)
    if tokens_file is not None:
        return _serve_operators(settings, host, port, tokens_file, hooks_dir)
    if not is_loopback(host) and token_file is None:
        fail(
            f"--host {host} is not a loopback address: give the token in a file "
            "(--token-file PATH, or HOOKBUS_CONSOLE_TOKEN_FILE) before listening off this machine",
            EXIT_USAGE,
        )
    generated = False
    if token_file is not None:
        from hookbus.errors import ConfigError
        from hookbus.harnesses.gateway_http import warn_if_readable_by_others

        try:  # whoever reads the token is the operator: only its owner may
            warn_if_readable_by_others(token_file, "console token file", refuse=True)
        except ConfigError as exc:
            fail(str(exc), EXIT_USAGE)
        try:
            token = token_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            fail(f"cannot read the token file {token_file}: {exc}", EXIT_USAGE)
    else:
        token = os.environ.get("HOOKBUS_CONSOLE_TOKEN", "").strip()
        if not token:
            token, generated = ConsoleAuth.generate(), True
    if len(token) < 16:
        fail("the console token must be at least 16 characters", EXIT_USAGE)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/"
    if generated:
        support.console.print(
            f"hookbus console for namespace {settings.namespace}: open {url}?token={token}",
            markup=False,
            highlight=False,
        )
    else:
        support.console.print(
            f"hookbus console for namespace {settings.namespace}: {url} (log in with your token)",
            markup=False,
            highlight=False,
        )
    serve(
        settings,
        host=host,
        port=port,
        token=token,
        hooks_dir=hooks_dir,
        operator=operator_identity(operator) if operator else None,
    )


def _serve_operators(
    settings: Settings, host: str, port: int, tokens_file: Path, hooks_dir: Path | None
) -> None:
    """The console with one token per operator (the gateway's tokens file format)."""
    from hookbus.console.app import serve
    from hookbus.errors import ConfigError
    from hookbus.harnesses.gateway_http import TokenTable

    try:
        operators = {t: name for t, name in TokenTable.from_file(tokens_file).pairs() if name}
    except ConfigError as exc:
        fail(str(exc), EXIT_USAGE)
    shown = f"[{host}]" if ":" in host else host
    text = f"{len(operators)} operator(s): each logs in with their own token"
    where = f"namespace {settings.namespace}: http://{shown}:{port}/ ({text})"
    support.console.print(f"hookbus console for {where}", markup=False, highlight=False)
    serve(settings, host=host, port=port, operators=operators, hooks_dir=hooks_dir)
