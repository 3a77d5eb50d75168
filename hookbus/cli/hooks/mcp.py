"""`hookbus mcp`: serve the authoring tools to an agent over MCP (stdio)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer

from hookbus.authoring.mcp_server import build_server
from hookbus.cli.support import fail, state

logger = logging.getLogger(__name__)


def mcp(
    ctx: typer.Context,
    hooks_dir: Annotated[
        Path | None,
        typer.Option(
            "--hooks-dir",
            "-d",
            "--dir",
            help="Hooks folder the tools work on (default: hooks_dir from config).",
            envvar="HOOKBUS_HOOKS_DIR",
        ),
    ] = None,
) -> None:
    """Serve hooks_list, hooks_audit, hook_write and hooks_reload over MCP (stdio)."""
    settings = state(ctx).settings()
    folder = (hooks_dir if hooks_dir is not None else Path(settings.hooks_dir)).absolute()
    try:
        server = build_server(settings, folder)
    except ImportError:
        fail("the mcp package is not installed: pip install 'hookbus[mcp]'")
    logger.info("serving MCP tools on stdio for %s", folder)
    server.run("stdio")
