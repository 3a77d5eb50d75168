"""Reading a captured pane: context pressure off the status line, and the session's state hint.

Pure functions of text (no tmux, no Redis), so that every pattern is tested on plain
strings. Patterns look at the bottom of the pane: history above may hold old menus and old
errors that no longer describe the agent.
"""

from __future__ import annotations

import re
from typing import Any

#: Context pressure above this is CRITICAL whatever the agent's threshold, in percent.
CRITICAL_PRESSURE_PCT = 80
#: Bottom lines of the pane the state hint and the status line are read from.
TAIL_LINES = 15

STATE_HINTS: tuple[str, ...] = ("menu", "idle", "permission_prompt", "error", "working")

_ANSI_RE = re.compile(
    r"\x1b\[[0-9;:?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]"
)
# SGR red foregrounds: 31, 91, 38;5;1/9/160/196, 38;2;R;G;B with a dominant red
_RED_RE = re.compile(
    r"\x1b\[(?:[0-9;]*;)?(?:31|91|38;5;(?:1|9|124|160|196)|38;2;(?:2[0-5][0-9]|1[5-9][0-9]);"
    r"(?:[0-9]|[1-7][0-9]);(?:[0-9]|[1-7][0-9]))(?:;[0-9;]*)?m([^\x1b]*)"
)
_PCT = r"(\d{1,3}(?:\.\d+)?)\s*%"
# (pattern, True when the figure is what is *left*): first match from the bottom wins
_PRESSURE_PATTERNS: tuple[tuple[re.Pattern[str], bool], ...] = (
    (re.compile(r"(?i)context\s+(?:left|remaining)[^\d\n%]{0,40}" + _PCT), True),
    (
        re.compile(r"(?i)" + _PCT + r"\s*(?:of\s+)?(?:context\s+|ctx\s+)?(?:left|remaining|free)"),
        True,
    ),
    (re.compile(r"(?i)(?:context|ctx)[^\d\n%]{0,20}" + _PCT), False),
    (re.compile(r"(?i)" + _PCT + r"\s*(?:of\s+)?(?:the\s+)?(?:context|ctx)"), False),
    (re.compile(r"[█▓▒░■□▰▱━─]{3,}\s*" + _PCT), False),
)
_PERMISSION_RE = re.compile(
    r"(?i)do you want to (?:proceed|make this edit|create|allow|run|overwrite|fetch)"
    r"|\bpermission (?:required|needed|to)\b|\ballow (?:this|once|always)\b|\(y/n\)"
)
_MENU_OPTION_RE = re.compile(r"^\s*[│|]?\s*(?:[❯›>▶→*]\s*)?\d{1,2}[.)]\s+\S")
_ERROR_RE = re.compile(
    r"(?i)^\s*[⎿│|]?\s*(?:error|fatal|exception|traceback)\b|\bAPI Error\b|✗|✘"
    r"|\b(?:command|request|tool) failed\b"
)
_ERROR_WORD_RE = re.compile(r"(?i)error|fail|fatal|denied|✗|✘")
_WORKING_RE = re.compile(r"(?i)esc to interrupt|ctrl\+c to interrupt")
_IDLE_RE = re.compile(r"\? for shortcuts|^\s*[│|]?\s*[>❯›](?:\s|$)")


def strip_ansi(text: str) -> str:
    """The text without terminal escape sequences."""
    return _ANSI_RE.sub("", text)


def tail(text: str, count: int) -> list[str]:
    """The last ``count`` lines of ``text``, trailing blank lines (an unused screen) dropped."""
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    return lines[-count:] if count > 0 else []


def context_pressure(lines: list[str]) -> int | None:
    """The context use in percent read off the status line (bottom-most figure), or None.

    Read forms: ``Context left until auto-compact: 12%`` (88 used), ``34% context left``,
    ``Context: 72%``, ``ctx 72%``, ``72% of context``, a bar ``█████░░░░░ 50%``."""
    for line in reversed(lines):
        for pattern, is_left in _PRESSURE_PATTERNS:
            found = pattern.search(line)
            if found is None:
                continue
            value = float(found.group(1))
            if value > 100:
                continue
            used = 100 - value if is_left else value
            return round(used)
    return None


def pressure_level(percent: int | None, threshold: int) -> str:
    """``OK`` up to the threshold, ``WARNING`` above it, ``CRITICAL`` above 80 %;
    ``UNKNOWN`` when no figure was found."""
    if percent is None:
        return "UNKNOWN"
    if percent > CRITICAL_PRESSURE_PCT:
        return "CRITICAL"
    if percent > threshold:
        return "WARNING"
    return "OK"


def _red_error(raw_lines: list[str]) -> bool:
    for line in raw_lines:
        for found in _RED_RE.finditer(line):
            if _ERROR_WORD_RE.search(found.group(1)):
                return True
    return False


def state_hint(plain_lines: list[str], raw_lines: list[str] | None = None) -> str:
    """The state hint from the bottom of the pane, first match wins:

    ``permission_prompt`` (a permission dialog), ``menu`` ("Enter to select" or two or more
    numbered options), ``error`` (an error line, or red text saying error/failed), ``working``
    ("esc to interrupt": still busy), ``idle`` (the input prompt is showing), else
    ``working``. ``raw_lines`` (with colour escapes) lets red text count."""
    bottom = [line for line in plain_lines if line.strip()][-TAIL_LINES:]
    text = "\n".join(bottom)
    if _PERMISSION_RE.search(text):
        return "permission_prompt"
    if "enter to select" in text.lower():
        return "menu"
    if sum(1 for line in bottom if _MENU_OPTION_RE.match(line)) >= 2:
        return "menu"
    if any(_ERROR_RE.search(line) for line in bottom):
        return "error"
    if raw_lines is not None and _red_error(raw_lines[-TAIL_LINES * 2 :]):
        return "error"
    if _WORKING_RE.search(text):
        return "working"
    if any(_IDLE_RE.search(line) for line in bottom):
        return "idle"
    return "working"


def analyse(raw_pane: str, lines: int, threshold: int) -> dict[str, Any]:
    """Pane text, context pressure and state hint from a raw capture (pure)."""
    raw_lines = tail(raw_pane, lines)
    plain_lines = [strip_ansi(line) for line in raw_lines]
    percent = context_pressure(plain_lines[-TAIL_LINES:])
    return {
        "pane": "\n".join(plain_lines),
        "state_hint": state_hint(plain_lines, raw_lines),
        "context_pressure": {
            "percent": percent,
            "level": pressure_level(percent, threshold),
            "threshold": threshold,
        },
    }
