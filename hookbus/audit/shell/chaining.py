"""The audit's shell-chaining rule: ``;``, ``&&``, ``|``, ``$(``... in a command while
``autonomy.allow_shell_chaining`` is false.

A hook command that chains runs several programs where the manifest names one, so the
audit reports each chaining operator found outside single quotes. Kept apart from
:mod:`hookbus.audit.shell.rules` (what a command does) because this rule is about a
command's shape, read from raw text with its own small quoting scanner.
"""

from __future__ import annotations

import re

from hookbus.audit.textscan import Sink

_STRUCTURAL_SEMICOLON = re.compile(r";;|;\s*(?:then|do|else|fi|done|esac)\b")
_SHELL_SPECIAL = re.compile(r"[\\'\";|&`$#\n]")


def chaining_ops(line: str) -> list[str]:
    """The chaining operators of one shell line outside single quotes: ``;``, ``&&``, ``||``,
    ``|``, backticks, ``$(`` (the last two also inside double quotes, where they expand).

    Walks only the characters that matter (quotes, escapes, operators), found by a regex."""
    if not _SHELL_SPECIAL.search(line):
        return []
    ops: list[str] = []
    quote: str | None = None
    skip_until = -1
    for m in _SHELL_SPECIAL.finditer(line):
        i = m.start()
        if i < skip_until:
            continue
        c = line[i]
        if quote == "'":
            if c == "'":
                quote = None
        elif c == "\\":
            skip_until = i + 2
        elif quote == '"':
            if c == '"':
                quote = None
            elif c == "`":
                ops.append("`")
            elif line.startswith("$(", i):
                ops.append("$(")
        elif c in "'\"":
            quote = c
        elif c == "#":
            if i == 0 or line[i - 1].isspace():
                break
        elif line.startswith(("&&", "||"), i):
            ops.append(line[i : i + 2])
            skip_until = i + 2
        elif c == ";":
            structural = _STRUCTURAL_SEMICOLON.match(line, i)
            if structural:  # `if x; then`, `for ...; do`, `;;` in a case: syntax, not chaining
                skip_until = structural.end()
            else:
                ops.append(c)
        elif c in "|`":
            ops.append(c)
        elif c == "\n":
            ops.append("newline")
        elif line.startswith("$(", i):
            ops.append("$(")
    return ops


def scan_chaining(text: str, sink: Sink, *, severity: str, what: str) -> None:
    """Report shell chaining in ``text`` (one finding per line)."""
    lines = text.splitlines() or [text]
    if what == "command" and len(lines) > 1:
        sink(
            "shell-chaining",
            severity,
            None,
            "the command spans several lines (each line is another command): put the steps in a "
            "handler script, or set autonomy.allow_shell_chaining = true",
        )
    for lineno, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        ops = sorted(set(chaining_ops(line)))
        if ops:
            sink(
                "shell-chaining",
                severity,
                lineno,
                f"shell chaining ({' '.join(ops)}) in the {what} while "
                "autonomy.allow_shell_chaining "
                "is false: "
                + (
                    "run one program and move the steps into a handler script"
                    if what == "command"
                    else "review each step (or set autonomy.allow_shell_chaining = true)"
                ),
            )
