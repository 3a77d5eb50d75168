"""Shell commands read the way a shell reads them, for guards.

A guard that greps the raw command string misses ``rm -rf build/ ~/`` (the dangerous target
is the second one) and flags ``echo "rm -rf /"``; one that reads the command as a shell does
checks every word of every simple command, through pipelines, ``&&`` / ``;`` lists, subshells,
loops, functions, command substitutions, ``sh -c '...'`` and wrappers such as ``sudo`` or
``xargs``. :func:`simple_commands` gives exactly that list of argument vectors (quotes
removed, redirection targets kept as words a guard can check).

bashlex parses bash; when it cannot (it lacks some syntax), :mod:`shlex` splits on the
control operators instead: a guard then still sees every word.
"""

from __future__ import annotations

import os
import shlex
from typing import Any

#: Words that run the rest of their arguments as a command.
WRAPPERS = frozenset(
    {
        "sudo",
        "doas",
        "env",
        "nice",
        "nohup",
        "time",
        "command",
        "exec",
        "xargs",
        "timeout",
        "stdbuf",
        "ionice",
        "chroot",
        "su",
        "builtin",
        "then",
        "do",
        "else",
    }
)
#: Options of those wrappers that take a value (``sudo -u root rm ...``).
WRAPPER_VALUES = {
    "sudo": frozenset({"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T"}),
    "doas": frozenset({"-u", "-C"}),
    "nice": frozenset({"-n"}),
    "ionice": frozenset({"-c", "-n", "-p"}),
    "xargs": frozenset({"-n", "-I", "-L", "-P", "-s", "-d", "-E", "-a"}),
    "timeout": frozenset({"-s", "-k"}),
    "su": frozenset({"-c", "-s", "-g", "-G"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "env": frozenset({"-u", "-C", "-S"}),
}
#: Wrappers whose first operand is not the command (``timeout 5 rm ...``).
WRAPPER_OPERANDS = {"timeout": 1, "chroot": 1}
#: Shells whose ``-c`` argument is itself a command line.
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "fish", "busybox"})
#: How deep ``sh -c`` nesting is followed.
MAX_DEPTH = 4

_OPERATORS = frozenset({";", "&&", "||", "|", "&", "(", ")", "|&", ";;", "\n"})


def simple_commands(source: str, _depth: int = 0) -> list[list[str]]:
    """Every simple command of ``source`` as its words, wrappers peeled off and ``sh -c``
    strings parsed in turn. Redirection targets follow the command's words."""
    found: list[list[str]] = []
    for words in _parse(source):
        for command in _unwrap(words):
            found.append(command)
            inner = _shell_string(command)
            if inner is not None and _depth < MAX_DEPTH:
                found.extend(simple_commands(inner, _depth + 1))
    return found


def _parse(source: str) -> list[list[str]]:
    try:
        import bashlex

        trees = bashlex.parse(source)
    except Exception:  # bashlex raises several types on syntax it lacks; fall back
        return _split(source)
    found: list[list[str]] = []
    for tree in trees:
        _walk(tree, found)
    return found


def _walk(node: Any, found: list[list[str]]) -> None:
    kind = getattr(node, "kind", None)
    if kind == "command":
        words = [p.word for p in node.parts if getattr(p, "kind", None) == "word"]
        targets = [
            p.output.word
            for p in node.parts
            if getattr(p, "kind", None) == "redirect" and hasattr(p.output, "word")
        ]
        if words or targets:
            found.append(words + targets)
    for name in ("parts", "list"):
        for child in getattr(node, name, None) or ():
            _walk(child, found)
    for name in ("command", "output"):
        child = getattr(node, name, None)
        if child is not None and hasattr(child, "kind"):
            _walk(child, found)


def _split(source: str) -> list[list[str]]:
    """The fallback: shlex words, cut into commands at control operators."""
    lexer = shlex.shlex(source, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    commands: list[list[str]] = [[]]
    try:
        tokens = list(lexer)
    except ValueError:  # an unbalanced quote: split on whitespace, keep every word
        tokens = source.split()
    for token in tokens:
        if token in _OPERATORS:
            commands.append([])
        elif token.strip("<>") == "" or token in ("2>", "&>"):
            continue
        else:
            commands[-1].append(token)
    return [c for c in commands if c]


def _unwrap(words: list[str]) -> list[list[str]]:
    """The command itself and, for ``sudo -u x rm ...`` / ``xargs rm ...``, the wrapped one."""
    out = [words]
    rest = list(words)
    while rest:
        # leading variable assignments (``A=1 rm ...``) are not the command
        rest = _drop_assignments(rest)
        wrapper = os.path.basename(rest[0]) if rest else ""
        if wrapper not in WRAPPERS:
            break
        rest = rest[1:]
        takes_value = WRAPPER_VALUES.get(wrapper, frozenset())
        while rest and rest[0].startswith("-") and rest[0] != "--":
            option = rest.pop(0)
            if option in takes_value and rest:
                rest.pop(0)
        if rest and rest[0] == "--":
            rest = rest[1:]
        rest = _drop_assignments(rest[WRAPPER_OPERANDS.get(wrapper, 0) :])
        if rest:
            out.append(rest)
    return out


def _drop_assignments(words: list[str]) -> list[str]:
    i = 0
    while i < len(words) and "=" in words[i] and not words[i].startswith(("-", "=")):
        i += 1
    return words[i:]


def _shell_string(words: list[str]) -> str | None:
    if not words or os.path.basename(words[0]) not in SHELLS:
        return None
    for i, word in enumerate(words[1:-1], start=1):
        if word.startswith("-") and not word.startswith("--") and "c" in word[1:]:
            return words[i + 1]
    return None
