"""What every CLI command shares: the global options, settings, output and exit codes.

Importing this module costs nothing heavy: typer, rich and the settings are loaded when a
function needs them (``console`` and ``err_console`` are created on first use), because the
lean commands (``hookbus --version``, a plain ``hookbus publish``) use the exit codes and the
error line too and must start in tens of milliseconds.
"""

from __future__ import annotations

import json
import sys

TYPE_CHECKING = False  # the lean commands do not import typing / dataclasses
if TYPE_CHECKING:
    from typing import Any, NoReturn

    import typer
    from rich.console import Console

    from hookbus.bus.settings.loader import LoadedSettings, Settings
    from hookbus.errors import HookBusError

# Exit codes, documented in the README. They must not collide: an agent CLI (Claude Code)
# reads 2 as "blocked", so nothing but a decision may exit 2; usage and configuration errors
# take the BSD sysexits numbers that scripts and supervisors (systemd) already know.
#: Success (a published event, an ``allow`` decision).
EXIT_OK = 0
#: An error (a hook that does not exist, a refused operation, a failed command).
EXIT_ERROR = 1
#: A decision that is not ``allow``: deny, ask or halt.
EXIT_DENIED = 2
#: Bad usage: an unknown option or command, a bad value, options that do not go together.
EXIT_USAGE = 64
#: Redis (or the embedded server) cannot be reached (sysexits ``EX_UNAVAILABLE``).
EXIT_UNAVAILABLE = 69
#: The configuration (hookbus.toml, HOOKBUS_* variables) is invalid (``EX_CONFIG``).
EXIT_CONFIG = 78


def exit_code_for(exc: HookBusError) -> int:
    """The exit code of a library error that reached the CLI."""
    from hookbus.errors import ConfigError, RedisUnavailable

    if isinstance(exc, ConfigError):
        return EXIT_CONFIG
    if isinstance(exc, RedisUnavailable):
        return EXIT_UNAVAILABLE
    return EXIT_ERROR


class CliState:
    """The global options, parsed once by the root callback and stored in ``ctx.obj``.

    :meth:`loaded` fills what nothing configures from a running ``hookbus dev``
    (:mod:`hookbus.bus.dev_state`) unless ``use_dev_state`` is off (``hookbus dev`` itself);
    :meth:`raw` never does."""

    def __init__(
        self,
        config_file: str | None = None,
        overrides: dict[str, Any] | None = None,
        json: bool = False,
    ) -> None:
        self.config_file = config_file
        self.overrides: dict[str, Any] = overrides or {}
        self.json = json
        self.use_dev_state = True
        self._raw: LoadedSettings | None = None
        self._loaded: LoadedSettings | None = None

    def raw(self) -> LoadedSettings:
        """Every source but a running dev (:mod:`hookbus.bus.settings.discovery`)."""
        if self._raw is None:
            from hookbus.bus.settings.loader import load_settings

            self._raw = load_settings(self.config_file, overrides=self.overrides, dev=False)
        return self._raw

    def loaded(self) -> LoadedSettings:
        """Every source, a running dev included (unless ``use_dev_state`` is off)."""
        if not self.use_dev_state:
            return self.raw()
        if self._loaded is None:
            from hookbus.bus.settings.loader import load_settings

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
    import typer

    try:  # typer vendors click since 0.2x; its context stack is typer's own
        from typer._click.globals import get_current_context
    except ImportError:  # pragma: no cover - older typer runs on click itself
        from click import get_current_context  # type: ignore[no-redef,assignment,unused-ignore]

    ctx: Any = get_current_context(silent=True)
    # typer hands commands this same object as their ``typer.Context``
    report_error(message, as_json=ctx is not None and want_json(ctx))
    raise typer.Exit(code)


def report_error(message: str, *, as_json: bool) -> None:
    """The one error line on stderr; with ``as_json`` also ``{"ok": false, "error": ...}``
    on stdout, so that a script reading stdout gets a JSON document on failure too."""
    print_error(message)
    if as_json:
        print_json({"ok": False, "error": message})


def print_error(message: str) -> None:
    """One ``error:`` line on stderr (bold red on a terminal); the message is printed as
    is, never as markup (``pip install 'hookbus[mcp]'`` must not lose its ``[mcp]``).

    Written without rich so that the lean commands can report errors too."""
    head = "\x1b[1;31merror:\x1b[0m" if sys.stderr.isatty() else "error:"
    sys.stderr.write(f"{head} {message}\n")
    sys.stderr.flush()


def print_warning(message: str) -> None:
    """One ``warning:`` line on stderr, like :func:`print_error`."""
    head = "\x1b[1;33mwarning:\x1b[0m" if sys.stderr.isatty() else "warning:"
    sys.stderr.write(f"{head} {message}\n")
    sys.stderr.flush()


def print_note(message: str) -> None:
    """One ``note:`` line on stderr: what a command did not do and what to add instead."""
    head = "\x1b[1;36mnote:\x1b[0m" if sys.stderr.isatty() else "note:"
    sys.stderr.write(f"{head} {message}\n")
    sys.stderr.flush()


_consoles: dict[str, Console] = {}


def __getattr__(name: str) -> Any:
    """``console`` (stdout) and ``err_console`` (stderr), rich Consoles made on first use."""
    if name in ("console", "err_console"):
        if name not in _consoles:
            from rich.console import Console

            _consoles[name] = Console(stderr=name == "err_console")
        return _consoles[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if TYPE_CHECKING:
    console: Console
    err_console: Console
