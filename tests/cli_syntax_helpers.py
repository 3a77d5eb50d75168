"""The real ``hookbus`` command tree, and a check of a command line against it (the command
exists, every flag exists and takes what it is given, required arguments are there), for the
tests that hold help texts, deploy/ files and docs to the CLI."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from functools import cache
from typing import Any

import typer
import typer.main
from typer._click import exceptions as click_exceptions

from hookbus.cli.root import _assemble, app

#: Shell words that end a hookbus command line (the rest belongs to the shell).
SHELL_BREAKS = {"|", "||", "&&", ";", "&", ">", ">>", "<", "2>", "2>&1", ">/dev/null"}


@cache
def cli_tree() -> Any:
    """The root click group with every part and adapter group registered."""
    _assemble()
    return typer.main.get_command(app)


def commands() -> Iterator[tuple[str, Any]]:
    """Every leaf command as (path, command): ``("hooks list", <command>)``."""

    def walk(command: Any, path: str) -> Iterator[tuple[str, Any]]:
        subs = getattr(command, "commands", None)
        if subs:
            for name, sub in sorted(subs.items()):
                yield from walk(sub, f"{path} {name}".strip())
        else:
            yield path, command

    yield from walk(cli_tree(), "")


def command_words(line: str) -> list[str]:
    """The words of a shell line from ``hookbus`` to the first shell operator; a leading
    ``VAR=value`` assignment and ``$ `` prompt are dropped."""
    words = shlex.split(line.removeprefix("$ "), comments=True)
    while words and "=" in words[0] and not words[0].startswith("-"):
        words = words[1:]
    if not words or words[0] != "hookbus":
        return []
    out = []
    for word in words[1:]:
        if word in SHELL_BREAKS or word.startswith((">", "2>", "<")):
            break
        out.append(word)
    return out


def check_command_line(args: list[str]) -> str | None:
    """None when ``hookbus ARGS`` parses against the real CLI, else what is wrong."""
    root = cli_tree()
    if {"--help", "-h", "--version"} & set(args):
        args = [a for a in args if a not in ("--help", "-h", "--version")]
        if not args or args[0].startswith("-"):
            return None
        args = [*args[: next((i for i, a in enumerate(args) if a.startswith("-")), len(args))]]
        return _path_problem(root, args)
    try:
        ctx = root.make_context("hookbus", [*args])  # the global options
    except typer.Exit:
        return None  # --help, --version
    except click_exceptions.ClickException as exc:
        return f"hookbus: {exc.format_message()}"
    rest = [*ctx._protected_args, *ctx.args]
    command, path = root, "hookbus"
    while getattr(command, "commands", None):
        if not rest:
            return None  # `hookbus tool` alone prints the group's help
        name, rest = rest[0], rest[1:]
        if name in ("--help", "-h"):
            return None
        if name not in command.commands:
            return f"{path} has no command {name!r}"
        command, path = command.commands[name], f"{path} {name}"
    try:
        command.make_context(path, list(rest))
    except typer.Exit:
        return None  # --help, --version
    except click_exceptions.ClickException as exc:
        return f"{path}: {exc.format_message()}"
    return None


def _path_problem(root: Any, words: list[str]) -> str | None:
    """None when ``words`` name a command or group (``hooks list``), else what is wrong."""
    command, path = root, "hookbus"
    for name in words:
        subs = getattr(command, "commands", None)
        if not subs:
            return None  # an argument of the command
        if name not in subs:
            return f"{path} has no command {name!r}"
        command, path = subs[name], f"{path} {name}"
    return None
