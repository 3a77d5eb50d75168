"""The audit's language-neutral text rules: invisible characters, regular expressions that
backtrack, paths the policy forbids; and the helpers every rule module shares (the
:data:`Sink` findings are reported through, long lines scanned in overlapping windows).
Secrets written into a manifest are :mod:`hookbus.audit.secret_scan`.

Each rule reports through a ``Sink`` (``sink(rule, severity, line, message)``, ``line``
1-based within the text given, or ``None``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

Sink = Callable[[str, str, int | None, str], None]

#: Lines longer than this are scanned in overlapping windows of this many characters.
WINDOW_CHARS = 2048
#: Overlap of two windows, in characters (longer than any single pattern's match).
WINDOW_OVERLAP_CHARS = 512
#: At most this many findings of one rule per file; the rest are summed up in one finding.
MAX_FINDINGS_PER_RULE = 5


def windows(line: str) -> Iterator[str]:
    """The line itself, or overlapping windows of a long line."""
    if len(line) <= WINDOW_CHARS:
        yield line
        return
    step = WINDOW_CHARS - WINDOW_OVERLAP_CHARS
    for start in range(0, len(line), step):
        yield line[start : start + WINDOW_CHARS]
        if start + WINDOW_CHARS >= len(line):
            break


def search(patterns: Iterable[re.Pattern[str]], line: str) -> bool:
    return any(p.search(w) for w in windows(line) for p in patterns)


def forbidden_variants(path: str) -> list[str]:
    """The spellings of one forbidden path: as given, ``~`` expanded, ``$HOME`` forms."""
    out = [path]
    if path.startswith("~/") or path == "~":
        rest = path[2:]
        home = str(Path.home())
        out += [f"$HOME/{rest}", f"${{HOME}}/{rest}", os.path.join(home, rest) if rest else home]
    return [p.rstrip("/") or "/" for p in out if p]


def forbidden_pattern(paths: tuple[str, ...]) -> re.Pattern[str] | None:
    variants = {v for p in paths for v in forbidden_variants(p) if v not in {"/", ""}}
    if not variants:
        return None
    alts = "|".join(re.escape(v) for v in sorted(variants, key=len, reverse=True))
    return re.compile(rf"(?<![\w.\-/])(?:{alts})(?![\w.\-])")


def scan_forbidden_paths(
    text: str, pattern: re.Pattern[str] | None, sink: Sink, *, what: str
) -> None:
    if pattern is None:
        return
    for lineno, line in enumerate(text.splitlines() or [text], start=1):
        if line.strip().startswith("#"):
            continue
        for w in windows(line):
            m = pattern.search(w)
            if m:
                sink(
                    "forbidden-path",
                    "high",
                    lineno,
                    f"the {what} touches {m.group(0)!r}, under autonomy.forbidden_paths: "
                    "remove it or ask an operator to change the policy",
                )
                break


# --- hidden text and slow patterns ------------------------------------------------------

#: Bidirectional controls and zero-width characters: they make code read differently from
#: what runs ("Trojan Source", CVE-2021-42574).
_HIDDEN_CHARS = re.compile("[\u202a-\u202e\u2066-\u2069\u200b-\u200f\u2060\ufeff]")


def scan_hidden_text(text: str, sink: Sink) -> None:
    """Invisible or direction-changing characters, which hide code from a reviewer."""
    for lineno, line in enumerate(text.splitlines(), start=1):
        found = _HIDDEN_CHARS.search(line)
        if found is not None and not (
            lineno == 1 and found.start() == 0 and found.group() == "\ufeff"
        ):
            sink(
                "hidden-text",
                "high",
                lineno,
                f"an invisible or bidirectional control character (U+{ord(found.group()):04X}) "
                "that makes the text read differently from what runs: remove it",
            )


#: A group that repeats something repeated, repeated again: ``(a+)+``, ``(\w*)*``, ``(a|a)*``.
_NESTED_QUANTIFIER = re.compile(r"\((?:[^()\\]|\\.){0,200}[+*](?:\?)?\)(?:[+*]|\{\d*,\d*\})")


def scan_regex(pattern: str, sink: Sink, *, line: int | None) -> None:
    """A ``match.pattern`` runs on every event on the critical path: catastrophic
    backtracking there stalls the chain, so nested quantifiers are flagged."""
    if _NESTED_QUANTIFIER.search(pattern[:WINDOW_CHARS]):
        sink(
            "regex-backtracking",
            "high",
            line,
            f"match.pattern {pattern[:80]!r} nests quantifiers (like (a+)+), which can take "
            "exponential time on some input and stall every request: rewrite it without the "
            "repeated group",
        )
