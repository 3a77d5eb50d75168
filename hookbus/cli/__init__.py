"""The ``hookbus`` command: a tiny argv pre-dispatcher in front of the typer app.

typer, click and rich cost a large multiple of a bare interpreter start to import
(docs/performance.md), paid by every invocation; an agent
runtime that shells out to ``hookbus publish`` per event, or a script asking
``hookbus --version``, must not pay it. So :func:`main` first looks the command up in
:data:`_LEAN`, a table of argv prefixes (after the global options) whose handlers import only
what they use, and runs the typer app (:mod:`hookbus.cli.root`) for everything else,
``--help`` included. A lean handler returns ``None`` to hand an invocation it does not cover
(an option it does not know) to the typer app, which then parses it as it always would.

This module imports nothing but ``sys``, which the interpreter has loaded (a lean handler's
module is loaded with ``__import__``: the ``importlib`` package costs another import).
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: the lean commands do not import typing
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

    LeanHandler = Callable[[list[str], dict[str, Any]], int | None]

#: Commands run without typer: (argv prefix after the global options, "module:function").
#: The function is called as ``function(args_after_the_prefix, global_options)`` and returns
#: an exit code, or ``None`` to hand the whole invocation to the typer app. One line per
#: command; the first matching prefix wins.
_LEAN: tuple[tuple[tuple[str, ...], str], ...] = (
    (("--version",), "hookbus.cli.lean:version"),
    (("publish",), "hookbus.cli.lean:publish"),
)

#: The root's options that take a value, by spelling, and the name a lean handler gets.
_GLOBAL_VALUES = {
    "--redis-url": "redis_url",
    "--namespace": "namespace",
    "-n": "namespace",
    "--config": "config",
    "-c": "config",
    "--log-level": "log_level",
}


def _split_globals(args: Sequence[str]) -> tuple[dict[str, Any], list[str]] | None:
    """The leading global options as a dict, and the rest; ``None`` for any form this
    small parser does not read (``-nX``, a missing value), which typer then handles."""
    options: dict[str, Any] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=")
        if arg == "--json":
            options["json"] = True
            i += 1
        elif eq and name.startswith("--") and name in _GLOBAL_VALUES:
            options[_GLOBAL_VALUES[name]] = value
            i += 1
        elif arg in _GLOBAL_VALUES:
            if i + 1 >= len(args):
                return None
            options[_GLOBAL_VALUES[arg]] = args[i + 1]
            i += 2
        elif arg.startswith("-") and arg != "--version":
            return None
        else:
            break
    return options, list(args[i:])


def _lean(args: Sequence[str]) -> int | None:
    """Run the lean handler for ``args``, or return ``None`` when there is none."""
    split = _split_globals(args)
    if split is None:
        return None
    options, rest = split
    if rest[1:2] == ["hook"]:
        # ``hookbus <cli> hook``, one per row of the adapter table (a tiny stdlib module)
        from hookbus.harnesses import adapters

        if rest[0] in adapters.ADAPTER_MODULES:
            return adapters.hook_entry(rest[0], rest[2:], options)
    for prefix, target in _LEAN:
        if tuple(rest[: len(prefix)]) == prefix:
            module_name, _, attr = target.partition(":")
            __import__(module_name)
            handler: LeanHandler = getattr(sys.modules[module_name], attr)
            return handler(rest[len(prefix) :], options)
    return None


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the console script and of ``python -m hookbus``."""
    args = list(sys.argv[1:] if argv is None else argv)
    from hookbus.bus.settings.secrets import command_line_warnings

    for warning in command_line_warnings(args):
        sys.stderr.write(f"hookbus: warning: {warning}\n")
    code = _lean(args)
    if code is None:
        from hookbus.cli.root import run

        code = run(args)
    raise SystemExit(code)
