"""``hookbus gateway``: a persistent HTTP server for agent CLIs' ``http`` hooks."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hookbus.cli.support import state


def gateway(
    ctx: typer.Context,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8787,
    tokens_file: Annotated[
        Path | None,
        typer.Option(
            "--tokens",
            envvar="HOOKBUS_GATEWAY_TOKENS_FILE",
            help="File of 'AGENT_ID TOKEN' lines (mode 600): each agent has its own bearer "
            "token and its events carry that agent id, whatever the body says.",
        ),
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option(
            "--token-file",
            envvar="HOOKBUS_GATEWAY_TOKEN_FILE",
            help="File holding one shared bearer token required on the hook paths.",
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="HOOKBUS_GATEWAY_TOKEN",
            help="Shared bearer token. On the command line every local user can read it in "
            "the process list: prefer --token-file or HOOKBUS_GATEWAY_TOKEN.",
        ),
    ] = None,
    rate: Annotated[
        float,
        typer.Option("--rate", min=1.0, help="Requests per second each agent may send."),
    ] = 1000.0,
) -> None:
    """Serve POST /v1/hooks/claude-code (and the other adapters' paths) and GET /healthz.

    Answers as `hookbus claude-code hook` does, from one long-lived process on the asyncio
    SDK: point Claude Code's http hooks at it
    (`hookbus claude-code install --mode http --url http://HOST:PORT`). Agents then hold a
    gateway token instead of a Redis user (docs/security.md).
    """
    from hookbus.harnesses.gateway import serve
    from hookbus.harnesses.gateway_http import (
        DEFAULT_BURST,
        RateLimiter,
        TokenTable,
        read_secret_file,
    )

    settings = state(ctx).settings()
    tables = [t for t in (tokens_file, token_file, token) if t]
    if len(tables) > 1:
        raise typer.BadParameter("give one of --tokens, --token-file and --token")
    tokens: TokenTable | None = None
    if tokens_file is not None:
        tokens = TokenTable.from_file(tokens_file)
    elif token_file is not None:
        tokens = TokenTable.shared(read_secret_file(token_file, "gateway token file"))
    elif token:  # on the command line it was warned about (hookbus.bus.settings.secrets)
        tokens = TokenTable.shared(token)
    limiter = RateLimiter(rate_per_s=rate, burst=max(DEFAULT_BURST, int(rate * 2)))
    typer.echo(
        f"hookbus gateway on http://{host}:{port} (namespace {settings.namespace})", err=True
    )
    serve(settings, host=host, port=port, tokens=tokens, limiter=limiter)
