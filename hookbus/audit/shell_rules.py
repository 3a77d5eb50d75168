"""The audit's shell rules over a command or a script's text: the pattern table of
:mod:`hookbus.audit.shell_patterns`, recursive deletes and wide chmods (found on tokens, not
text), writes into the hooks folder, and shell chaining (``;``, ``&&``, ``|``, ``$(``...)
while ``autonomy.allow_shell_chaining`` is false.
"""

from __future__ import annotations

import os
import re

from hookbus.audit.shell_commands import program, segments, tokens
from hookbus.audit.shell_patterns import (
    CHMOD_ROOTS,
    CHMOD_WIDE,
    DANGEROUS_RM_TARGETS,
    FORK_BOMB_MULTILINE,
    HOOK_MANIFEST_NAMES,
    HOOKBUS_SELF_EDIT,
    PATTERN_RULES,
    RM_CHMOD_WORDS,
    RMTREE_ROOT,
    WRITE_OP,
)
from hookbus.audit.textscan import WINDOW_CHARS, Sink, search, windows


def _rm_dangerous(segment: list[str]) -> bool:
    prog, args = program(segment)
    if prog is None:
        return False
    base = os.path.basename(prog)
    if base == "rm":
        flags = [a for a in args if a.startswith("-") and a != "-"]
        recursive = any(
            a == "--recursive" or (not a.startswith("--") and "r" in a.lower()) for a in flags
        )
        targets = [a for a in args if not a.startswith("-")]
        return recursive and any(t in DANGEROUS_RM_TARGETS for t in targets)
    if base == "find":
        targets = [a for a in args if not a.startswith("-")][:1]
        deletes = "-delete" in args or ("-exec" in args and "rm" in args)
        return deletes and any(t in DANGEROUS_RM_TARGETS for t in targets)
    return False


def _chmod_dangerous(segment: list[str]) -> bool:
    prog, args = program(segment)
    if prog is None or os.path.basename(prog) != "chmod":
        return False
    plain = [a for a in args if not a.startswith("-")]
    return bool(plain) and plain[0] in CHMOD_WIDE and any(t in CHMOD_ROOTS for t in plain[1:])


def scan_dangerous(text: str, sink: Sink, *, hooks_refs: tuple[str, ...] = ()) -> None:
    """Dangerous shell in ``text`` (a command or a script; comment lines skipped)."""
    hooks_pattern = _hooks_ref_pattern(hooks_refs)
    for lineno, line in enumerate(text.splitlines() or [text], start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "//")):
            continue
        lower = line.lower()
        for row in PATTERN_RULES:
            if not row.prefilter(line, lower):
                continue
            found = (
                search(row.patterns, line)
                if row.windowed
                else any(p.search(line) for p in row.patterns)
            )
            if found:
                sink(row.rule, row.severity, lineno, row.message)
        if hooks_pattern is not None and _writes_hooks(line, hooks_pattern):
            sink(
                "hooks-dir-write",
                "critical",
                lineno,
                "writes into the hooks folder (a hook must not rewrite hooks): keep its files in "
                "its own "
                "folder and let a person or `hookbus hooks write` change hooks",
            )
        if len(line) <= WINDOW_CHARS * 4 and RM_CHMOD_WORDS.search(line):
            segs = list(segments(tokens(line)))
            if any(_rm_dangerous(s) for s in segs) or RMTREE_ROOT.search(line):
                sink(
                    "rm-rf",
                    "critical",
                    lineno,
                    "recursive delete of /, ~ or *: remove it or name the exact path to delete",
                )
            if any(_chmod_dangerous(s) for s in segs):
                sink("chmod-777", "critical", lineno, "chmod 777 (or a+w) on / or ~: remove it")
    if FORK_BOMB_MULTILINE.search(text[: 1024 * 1024]):
        sink("fork-bomb", "critical", None, "os.fork() in an endless loop: remove it")


def _hooks_ref_pattern(refs: tuple[str, ...]) -> re.Pattern[str] | None:
    parts = [re.escape(r.rstrip("/")) + r"(?:/|\b|$)" for r in refs if r and r.rstrip("/")]
    parts.append(HOOK_MANIFEST_NAMES.pattern)
    try:
        return re.compile("|".join(parts))
    except re.error:  # pragma: no cover - escaped input cannot fail
        return HOOK_MANIFEST_NAMES


def _writes_hooks(line: str, hooks_pattern: re.Pattern[str]) -> bool:
    if HOOKBUS_SELF_EDIT.search(line):
        return True
    return any(hooks_pattern.search(w) and WRITE_OP.search(w) for w in windows(line))


# --- chaining -------------------------------------------------------------------------


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
