"""The audit's pattern table for scripts and command lines: each row is a rule id, its
severity, the message that says what to change, a cheap prefilter and the regular
expressions that find it.

The rows are ordered as they report. The expressions and the prefilter words themselves are
data in :mod:`hookbus.audit.shell.patterns`; :mod:`hookbus.audit.shell.rules` runs the table
over each line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from hookbus.audit.shell.patterns import (
    CD_UP,
    DECODE_WORDS,
    DECODED_EXEC,
    DEVICE_WRITE,
    DOWNLOAD_TO_SHELL,
    DOWNLOAD_WORDS,
    FORK_BOMB,
    REVERSE_SHELL,
    REVERSE_WORDS,
    STARTUP_WORDS,
    STARTUP_WRITE,
)


@dataclass(frozen=True)
class PatternRule:
    """One row of the table: ``prefilter(line, lower)`` must hold before the (slower)
    ``patterns`` are searched, in windows of the line when ``windowed``."""

    rule: str
    severity: str
    message: str
    prefilter: Callable[[str, str], bool]
    patterns: tuple[re.Pattern[str], ...]
    windowed: bool = True


def _words(*words: str) -> Callable[[str, str], bool]:
    return lambda _line, lower: any(w in lower for w in words)


def _fork_prefilter(line: str, lower: str) -> bool:
    return "fork" in lower or ("(" in line and "|" in line and "&" in line)


#: The line rules, in the order they report.
PATTERN_RULES: tuple[PatternRule, ...] = (
    PatternRule(
        "fork-bomb",
        "critical",
        "a fork bomb: remove it; a hook must never spawn processes without bound",
        _fork_prefilter,
        FORK_BOMB,
    ),
    PatternRule(
        "download-to-shell",
        "critical",
        "downloaded content is run by a shell or interpreter: ship the script inside the "
        "hook folder instead, where the audit and the bundle can see it",
        _words(*DOWNLOAD_WORDS),
        DOWNLOAD_TO_SHELL,
    ),
    PatternRule(
        "reverse-shell",
        "critical",
        "a reverse-shell pattern (/dev/tcp, nc -e, bash -i >&, mkfifo pipes, socat "
        "exec): remove it",
        _words(*REVERSE_WORDS),
        REVERSE_SHELL,
    ),
    PatternRule(
        "decoded-exec",
        "critical",
        "decoded or fetched content is executed (base64 | sh, eval $(...), "
        "exec(b64decode(...))): write the code in plain text in the hook folder",
        _words(*DECODE_WORDS),
        DECODED_EXEC,
    ),
    PatternRule(
        "device-write",
        "critical",
        "writes to a block device (dd of=/dev/..., mkfs): remove it",
        lambda line, _lower: "/dev/" in line or "mkfs" in line,
        DEVICE_WRITE,
    ),
    PatternRule(
        "startup-file-write",
        "critical",
        "writes to a shell start-up or persistence file (~/.bashrc, ~/.profile, "
        "authorized_keys, crontab): a hook must not change what runs at login",
        _words(*STARTUP_WORDS),
        STARTUP_WRITE,
    ),
    PatternRule(
        "path-escape",
        "high",
        "the handler changes directory out of its hook folder (cd .., cd /, cd ~): "
        "work inside the hook folder (it is the working directory)",
        lambda line, _lower: "cd" in line or "chdir" in line,
        (CD_UP,),
        windowed=False,
    ),
)
