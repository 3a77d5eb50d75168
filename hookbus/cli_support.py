"""What every CLI command shares: the global options, settings, output and exit codes.

Exit codes (documented in the README): 0 ok, 1 error, 2 denied / ask / halt or bad usage.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any, NoReturn

import typer
from rich.console import Console

from hookbus.config import LoadedSettings, Settings, load_settings

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_DENIED = 2
EXIT_USAGE = 2

console = Console()
err_console = Console(stderr=True)


@dataclass
class CliState:
    """The global options, parsed once by the root callback and stored in ``ctx.obj``."""

    config_file: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    json: bool = False
    _loaded: LoadedSettings | None = None

    def loaded(self) -> LoadedSettings:
        if self._loaded is None:
            self._loaded = load_settings(self.config_file, overrides=self.overrides)
        return self._loaded

    def settings(self) -> Settings:
        return self.loaded().settings


def state(ctx: typer.Context) -> CliState:
    """The CliState of this invocation (a fresh default one when run without the root)."""
    root = ctx.find_root()
    if not isinstance(root.obj, CliState):
        root.obj = CliState()
    return root.obj


def want_json(ctx: typer.Context, flag: bool = False) -> bool:
    return flag or state(ctx).json


def print_json(data: Any) -> None:
    """Machine output: one JSON document on stdout, nothing else."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """Print one clear error line on stderr and exit with ``code``."""
    print_error(message)
    raise typer.Exit(code)


def print_error(message: str) -> None:
    """One red ``error:`` line on stderr; the message is printed as is, never as markup
    (``pip install 'hookbus[mcp]'`` must not lose its ``[mcp]``)."""
    from rich.markup import escape

    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
