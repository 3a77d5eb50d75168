"""The real ``hookbus`` command tree, and a check of a command line against it (the command
exists, every flag exists and takes what it is given, required arguments are there), for the
tests that hold help texts, deploy/ files and docs to the CLI."""

from __future__ import annotations

import re
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


#: Where an inline command ends: a closing backquote, a shell separator, a comment.
_INLINE = re.compile(r"`(hookbus [^`]*)`")
#: A synopsis's own notation: [optional], a|b alternatives, ellipses.
_NOTATION = re.compile(r"[\[\]]|\.\.\.")


def check_synopsis(text: str) -> str | None:
    """A looser check for a synopsis (``hookbus dlq purge [JOB_ID ...] [--yes]``): the
    command exists and every flag it shows is one of that command's or a global one."""
    words = _NOTATION.sub(" ", text).replace("|", " ").split()
    if not words or words[0] != "hookbus":
        return None
    root = cli_tree()
    command, path, i, parent = root, "hookbus", 1, None
    while i < len(words) and words[i].startswith("-") and _takes_value(root, words[i]):
        i += 2  # a global option and its value
    while getattr(command, "commands", None) and i < len(words):
        word = words[i]
        if word.startswith("-"):
            break
        if word not in command.commands:
            return f"{path} has no command {word!r}"
        parent = command
        command, path, i = command.commands[word], f"{path} {word}", i + 1
    siblings = [command]
    if parent is not None:  # `hooks pending|approve NAME|reject NAME`: each one's options
        siblings += [parent.commands[w] for w in words[i:] if w in parent.commands]
    params = [p for c in siblings for p in c.params] + list(root.params)
    known = {o for p in params for o in [*p.opts, *p.secondary_opts]}
    known |= {"--help", "-h"}
    for word in words[i:]:
        flag = word.split("=", 1)[0]
        is_flag = flag[:2] == "--" or (flag[:1] == "-" and flag[1:2].isalpha())
        if is_flag and flag.rstrip(",.:") not in known:
            return f"{path} has no option {flag!r}"
    return None


def _takes_value(command: Any, flag: str) -> bool:
    return any(flag in p.opts and not p.is_flag for p in command.params)


def inline_commands(text: str) -> list[str]:
    """The ``hookbus ...`` commands quoted inline (between backquotes) in ``text``."""
    return [m.group(1) for m in _INLINE.finditer(text)]


def shell_lines(text: str) -> list[tuple[int, str]]:
    """(line number, command) of each ``hookbus`` command in the shell blocks of a
    Markdown text (``bash``/``sh``/``console`` fences; ``$ `` lines of a console block),
    continuation lines joined."""
    found = []
    for match in _FENCE.finditer(text):
        lang, body = match.group(1), match.group(2)
        if lang not in ("bash", "sh", "shell", "console"):
            continue
        first = text[: match.start()].count("\n") + 2
        joined = body.replace("\\\n", " ")
        for offset, line in enumerate(joined.splitlines()):
            if lang == "console" and not line.startswith("$ "):
                continue
            stripped = line.removeprefix("$ ").strip()
            if command_words(stripped) or stripped.split()[:1] == ["hookbus"]:
                found.append((first + offset, stripped))
    return found


_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


#: Inline ``hookbus X`` spans that are prose or a placeholder, not a command.
PROSE = {"is", "fake-cli", "<cli>"}


def check_inline(text: str) -> str | None:
    """Check an inline ``hookbus ...`` span: a synopsis (``[--yes]``, ``a|b``, ``<cli>``)
    by :func:`check_synopsis`; a concrete command strictly, except that a missing argument
    is allowed (```hookbus dlq show``` names the command, it does not run it)."""
    text = text.replace("\\|", "|")
    words = text.split()
    if len(words) < 2 or words[1] in PROSE:
        return None
    if all(not w.startswith("-") for w in words) and _is_a_path(words[1:]):
        return _path_problem(cli_tree(), words[1:])  # names a command, does not run it
    placeholder = any(re.fullmatch(r"[A-Z][A-Z_]*", w) for w in words)
    if placeholder or any(mark in text for mark in ("[", "|", "<", "...", "…")):
        return check_synopsis(text)
    problem = check_command_line(command_words(text))
    if problem and "Missing argument" in problem:
        return None
    return problem


def _is_a_path(words: list[str]) -> bool:
    """True when every word names a group or command, the one after the other."""
    command = cli_tree()
    for word in words:
        subs = getattr(command, "commands", None) or {}
        if word not in subs:
            return False
        command = subs[word]
    return True
