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

    def local_settings(self) -> Settings:
        """The settings of a command that reads only files (the hooks folder, the event
        catalogue, deadlines): a ``hookbus dev`` that has stopped refuses the commands that
        would reach a Redis, not these."""
        from hookbus.errors import StoppedDevError

        try:
            return self.settings()
        except StoppedDevError:
            return self.raw().settings

    def located(self, exc: HookBusError) -> HookBusError:
        """``exc``, or for a :class:`~hookbus.errors.RedisUnavailable` that names no
        namespace the same error naming the one this command used: the connection layer
        knows only the URL, and a user talking to the wrong namespace needs both."""
        from hookbus.errors import RedisUnavailable

        loaded = self._loaded or self._raw
        if not isinstance(exc, RedisUnavailable) or exc.namespace or loaded is None:
            return exc
        return RedisUnavailable(exc.url, exc.reason, namespace=loaded.settings.namespace)


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


#: Width a console writing to a pipe or a file renders at: wide enough that no line is ever
#: wrapped (a script reading ``hookbus ... | cat`` gets each record and each reason on one
#: line); tables still take only the width their cells need.
PIPE_WIDTH = 1 << 16


def print_note(message: str) -> None:
    """One ``note:`` line on stderr: what a command did not do and what to add instead."""
    head = "\x1b[1;36mnote:\x1b[0m" if sys.stderr.isatty() else "note:"
    sys.stderr.write(f"{head} {message}\n")
    sys.stderr.flush()


_consoles: dict[str, Console] = {}


def _make_console(stderr: bool) -> Console:
    """A rich Console for stdout or stderr: on a terminal it wraps by word at the terminal's
    width; written to a pipe or a file it never wraps (``soft_wrap``, :data:`PIPE_WIDTH`)."""
    from rich.console import Console

    made = Console(stderr=stderr)
    if not made.is_terminal:
        made = Console(stderr=stderr, soft_wrap=True, width=PIPE_WIDTH)
    return made


def __getattr__(name: str) -> Any:
    """``console`` (stdout) and ``err_console`` (stderr), rich Consoles made on first use."""
    if name in ("console", "err_console"):
        if name not in _consoles:
            _consoles[name] = _make_console(stderr=name == "err_console")
        return _consoles[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Column:
    """A column of :func:`print_table`. ``keep`` marks values that must never be broken
    inside (ids, URLs, paths, names): the column is as wide as its longest value, or the
    table gives way to one record per block. Other columns wrap between words."""

    __slots__ = ("justify", "keep", "name")

    def __init__(self, name: str, *, keep: bool = False, justify: JustifyMethod = "left") -> None:
        self.name = name
        self.keep = keep
        self.justify = justify


def print_table(
    title: str | None,
    columns: Sequence[Column],
    rows: Iterable[Sequence[str | Text]],
    *,
    out: Console | None = None,
) -> None:
    """Print ``rows`` so that no id, URL or path is ever cut: a table when it fits the
    terminal with every ``keep`` column whole and every word of the others whole, else one
    record per block (``name: value`` lines, never wrapped by hookbus). Piped, the table is
    as wide as its cells. Cells are plain text (a :class:`~rich.text.Text` for style)."""
    from rich.text import Text

    target = out if out is not None else __getattr__("console")
    cells = [[c if isinstance(c, Text) else Text(c) for c in row] for row in rows]
    widths = _column_widths(target, columns, cells)
    if widths is None:
        _print_records(target, title, columns, cells)
        return
    from rich import box
    from rich.table import Table

    table = Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    for column, width in zip(columns, widths, strict=True):
        table.add_column(column.name, width=width, justify=column.justify, overflow="fold")
    for row in cells:
        table.add_row(*row)
    target.print(table)


#: What a :func:`print_table` table adds between two columns: their padding and divider.
_GAP = 2


def _column_widths(
    target: Console, columns: Sequence[Column], cells: list[list[Text]]
) -> list[int] | None:
    """Each column's width when the table fits ``target`` with nothing cut (a ``keep``
    value whole, a word whole); None when it does not."""
    least: list[int] = []
    most: list[int] = []
    for index, column in enumerate(columns):
        texts = [row[index].plain for row in cells] + [column.name]
        longest = max(_widest(text, words=False) for text in texts)
        word = max(_widest(text, words=True) for text in texts)
        least.append(longest if column.keep else word)
        most.append(longest)
    spare = target.width - sum(least) - _GAP * (len(columns) - 1)
    if spare < 0:
        return None
    widths = list(least)
    for index in sorted(range(len(columns)), key=lambda i: most[i] - least[i]):
        grow = min(most[index] - widths[index], spare)
        widths[index] += grow
        spare -= grow
    return widths


def _widest(text: str, *, words: bool) -> int:
    from rich.cells import cell_len

    parts = text.split() if words else text.splitlines()
    return max((cell_len(part) for part in parts), default=0)


def print_fields(rows: Iterable[tuple[str, str]], *, out: Console | None = None) -> None:
    """One record as ``key  value`` lines, the keys aligned, each line printed whole (a
    narrow terminal folds it; copying gives the value unbroken)."""
    from rich.text import Text

    target = out if out is not None else __getattr__("console")
    pairs = list(rows)
    width = max((len(key) for key, _ in pairs), default=0)
    for key, value in pairs:
        line = Text(key.ljust(width + 2), style="bold").append(value)
        target.print(line, soft_wrap=True)


def _print_records(
    target: Console, title: str | None, columns: Sequence[Column], cells: list[list[Text]]
) -> None:
    """The narrow form of a table: a block of ``name: value`` lines per record, printed
    without wrapping (the terminal folds a long line; copying it gives the value whole)."""
    from rich.text import Text

    if title:
        target.print(Text(title, style="bold"), soft_wrap=True)
    for number, row in enumerate(cells):
        if number or title:
            target.print()
        for column, cell in zip(columns, row, strict=True):
            line = Text(f"{column.name}: ", style="bold").append_text(cell)
            target.print(line, soft_wrap=True)


if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from rich.console import JustifyMethod
    from rich.text import Text

    console: Console
    err_console: Console
