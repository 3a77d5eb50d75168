"""The audit's shell rules over a command or a script's text: the pattern table of
:mod:`hookbus.audit.pattern_table`, recursive deletes and wide chmods (found on tokens, not
text) and writes into the hooks folder. Shell chaining (``;``, ``&&``, ``|``, ``$(``...) is
:mod:`hookbus.audit.shell.chaining`.
"""

from __future__ import annotations

import os
import re

from hookbus.audit.pattern_table import PATTERN_RULES
from hookbus.audit.shell.commands import program, segments, tokens
from hookbus.audit.shell.patterns import (
    CHMOD_ROOTS,
    CHMOD_WIDE,
    DANGEROUS_RM_TARGETS,
    FORK_BOMB_MULTILINE,
    HOOK_MANIFEST_NAMES,
    HOOKBUS_SELF_EDIT,
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
