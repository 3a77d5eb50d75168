"""What every CLI command shares: the global options, settings, output and exit codes.

Exit codes (documented in the README): 0 ok, 1 error, 2 denied / ask / halt or bad usage.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any, NoReturn, cast

import typer
from rich.console import Console

from hookbus.bus.settings import LoadedSettings, Settings, load_settings

try:  # typer vendors click since 0.2x; its context stack is typer's own
    from typer._click.globals import get_current_context
except ImportError:  # pragma: no cover - older typer runs on click itself
    from click import get_current_context  # type: ignore[no-redef,assignment,unused-ignore]

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
    """The CliState of this invocation (a fresh default one when run without the root).

    A command's own ``--json`` is recorded here as if given globally, so that an error
    raised anywhere in the command is answered in JSON too."""
    root = ctx.find_root()
    if not isinstance(root.obj, CliState):
        root.obj = CliState()
    if ctx.params.get("json_flag"):
        root.obj.json = True
    return root.obj


def want_json(ctx: typer.Context, flag: bool = False) -> bool:
    return flag or state(ctx).json


def print_json(data: Any) -> None:
    """Machine output: one JSON document on stdout, nothing else."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """Print one clear error line on stderr (and, in JSON mode, a JSON error object on
    stdout) and exit with ``code``."""
    ctx = get_current_context(silent=True)
    # typer hands commands this same object as their ``typer.Context``
    report_error(message, as_json=ctx is not None and want_json(cast("typer.Context", ctx)))
    raise typer.Exit(code)


def report_error(message: str, *, as_json: bool) -> None:
    """The one error line on stderr; with ``as_json`` also ``{"ok": false, "error": ...}``
    on stdout, so that a script reading stdout gets a JSON document on failure too."""
    print_error(message)
    if as_json:
        print_json({"ok": False, "error": message})


def print_error(message: str) -> None:
    """One red ``error:`` line on stderr; the message is printed as is, never as markup
    (``pip install 'hookbus[mcp]'`` must not lose its ``[mcp]``)."""
    from rich.markup import escape

    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
