"""The audit's language-neutral text rules: secrets written into a manifest, invisible
characters, regular expressions that backtrack, paths the policy forbids; and the helpers
every rule module shares (the :data:`Sink` findings are reported through, long lines
scanned in overlapping windows).

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


# --- secrets --------------------------------------------------------------------------
_SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("a private key", re.compile(r"-----BEGIN (?:[A-Z0-9]+ ){0,4}PRIVATE KEY-----"), "critical"),
    ("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), "high"),
    (
        "a GitHub token",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"),
        "high",
    ),
    ("a Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), "high"),
    ("an API key", re.compile(r"\bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_-]{20,}"), "high"),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}"), "high"),
    ("a Stripe key", re.compile(r"\b[rs]k_(?:live|test)_[0-9A-Za-z]{16,}"), "high"),
    (
        "a JSON web token",
        re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
        "high",
    ),
    ("a bearer token", re.compile(r"\b[Bb]earer\s+(?![$%{<])[A-Za-z0-9._~+/-]{16,}=*"), "high"),
    (
        "a password in a URL",
        re.compile(r"\b[a-z][a-z0-9+.-]{0,16}://[^/\s:@'\"]{1,128}:(?![$%{])[^/\s@'\"]{1,128}@"),
        "high",
    ),
    (
        "a password or token",
        re.compile(
            r"(?i)(?<![\w])[\w-]{0,64}(?:password|passwd|secret|api[_-]?key|access[_-]?key|"
            r"private[_-]?key|auth[_-]?token|access[_-]?token|token)\b[\"']?\s*[=:]\s*[\"']?"
            r"(?![$%{<])(?![0-9.]+\b)[^\s\"'$,}]{6,}"
        ),
        "high",
    ),
)

_CREDENTIAL_NAME = re.compile(
    r"(?i)(pass(word|wd)?|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|credential|auth|cookie|session[_-]?id)"
)
_REFERENCE = re.compile(
    r"^\s*(?:\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|%\([A-Za-z_]+\)s|\{\{[^}]*\}\})\s*$"
)


def scan_secrets(text: str, sink: Sink) -> None:
    """Tokens, private keys and passwords written into a manifest."""
    for lineno, line in enumerate(text.splitlines(), start=1):
        for w in windows(line):
            hit = next(
                ((label, sev) for label, pat, sev in _SECRET_PATTERNS if pat.search(w)), None
            )
            if hit is not None:
                label, sev = hit
                sink(
                    "secret-in-manifest",
                    sev,
                    lineno,
                    f"{label} is written into the manifest (it would travel in every bundle): "
                    "move it to an environment variable listed in security.env_allowlist and "
                    "refer to it as ${NAME}",
                )
                break


def looks_like_credential(name: str, value: str) -> str | None:
    """Why an env/header value looks like a credential, or ``None``."""
    if not isinstance(value, str) or not value.strip() or _REFERENCE.match(value):
        return None
    if "${" in value or value.startswith("$"):
        return None
    for label, pat, _sev in _SECRET_PATTERNS:
        if pat.search(value[:WINDOW_CHARS]):
            return label
    if _CREDENTIAL_NAME.search(name) and len(value) >= 6 and not value.isdigit():
        return f"a literal value for {name!r}"
    return None


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
