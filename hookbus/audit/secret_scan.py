"""The audit's secret rules: tokens, private keys and passwords written where they would
travel in every bundle.

:func:`scan_secrets` reports them in a manifest's text; :func:`looks_like_credential` judges
one env or header value (a literal secret, not a ``${NAME}`` reference). Both share one
table of known token shapes, kept here apart from the other text rules of
:mod:`hookbus.audit.textscan` because it is the list that grows.
"""

from __future__ import annotations

import re

from hookbus.audit.textscan import WINDOW_CHARS, Sink, windows

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
