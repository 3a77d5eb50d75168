"""``hookbus gateway``: a persistent HTTP server for agent CLIs' ``http`` hooks."""

from __future__ import annotations

from typing import Annotated

import typer

from hookbus.cli.support import state


def gateway(
    ctx: typer.Context,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8787,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="HOOKBUS_GATEWAY_TOKEN",
            help="Require 'Authorization: Bearer TOKEN' on the hook paths.",
        ),
    ] = None,
) -> None:
    """Serve POST /v1/hooks/claude-code (and the other adapters' paths) and GET /healthz.

    Answers exactly as `hookbus claude-code hook` does, from one long-lived process with
    pooled Redis connections: point Claude Code's http hooks at it
    (`hookbus claude-code install --mode http --url http://HOST:PORT`).
    """
    import os

    from hookbus.harnesses.gateway import serve
    from hookbus.harnesses.lean.config import load

    cli = state(ctx)
    environ = dict(os.environ)
    if cli.overrides.get("redis_url"):
        environ["HOOKBUS_REDIS_URL"] = str(cli.overrides["redis_url"])
    if cli.overrides.get("namespace"):
        environ["HOOKBUS_NAMESPACE"] = str(cli.overrides["namespace"])
    if cli.config_file:
        environ["HOOKBUS_CONFIG"] = cli.config_file
    cfg = load(environ)
    typer.echo(f"hookbus gateway on http://{host}:{port} (namespace {cfg.namespace})", err=True)
    serve(cfg, host=host, port=port, token=token or None)
