"""What a script's own assignments say about its variables, for two ordinary idioms the
parser alone would refuse.

* **Counting.** bashlex cannot read ``$(( ))``, and bash arithmetic is not inert: a variable
  whose value is ``a[$(cmd)]`` runs ``cmd`` when it is evaluated. An expansion is accepted
  (and handed to the parser as a literal number) only when it holds nothing but operators,
  numbers and names, and every name in it is one the script itself sets, and only ever to
  an integer or to another accepted expansion, never with ``read``, ``for``, ``declare`` and
  the like, and the script sources nothing. ``n=0; while read -r l; do n=$((n+1)); done`` is
  accepted; ``n='a[$(id)]'; echo $((n))`` and ``read n; echo $((n+1))`` are not.
* **Scratch files.** An agent's hook runs with a private, size-bounded ``/tmp`` (its
  ``$TMPDIR``), so a write under ``$TMPDIR`` is no write outside the hook. A variable the
  script sets only to such a path (``f="${TMPDIR:-/tmp}/x.$$"``) or to ``$(mktemp)`` is a
  scratch path, and so is ``"$f"`` as a redirection or a writer's target.
"""

from __future__ import annotations

import re

#: ``NAME=VALUE`` at the start of a command, with the value up to where the word ends.
_ASSIGNMENT = re.compile(
    r"(?:^|(?<=[\s;&|(`]))([A-Za-z_]\w*)="
    r"(\"(?:[^\"\\\n]|\\.)*\"|'[^'\n]*'|\$\(\([^()\n]*\)\)|\$\([^()\n]*\)|[^\s;&|()<>]*)"
)
#: Commands that bind a variable other than by ``NAME=VALUE``: a name on their line is
#: taken to be set by them.
_BINDERS = re.compile(
    r"(?:^|(?<=[\s;&|(`]))(?:read|for|declare|typeset|local|export|readonly|getopts|"
    r"mapfile|readarray|let|select|unset|printf\s+-v)\b[^\n;&|]*"
)
#: Sourcing a file may set any variable.
_SOURCES = re.compile(r"(?:^|(?<=[\s;&|(`]))(?:source|\.)\s")
#: ``$(( ... ))`` with nothing in it but operators, numbers and (``$``) names.
_ARITHMETIC = re.compile(r"\$\(\(([A-Za-z0-9_\s+\-*/%()<>=!&|^~?:,${}]*)\)\)")
_NAME = re.compile(r"(?<![\w$])\$?\{?([A-Za-z_]\w*)\}?")
_BAD_DOLLAR = re.compile(r"\$(?!\{?[A-Za-z_])")
_INTEGER = re.compile(r"[\"']?-?[0-9]+[\"']?")
#: A path under the run's temp folder, ``$$`` (the shell's pid) allowed in the rest.
_TEMP_PATH = re.compile(r"\"?\$(?:TMPDIR|\{TMPDIR\}|\{TMPDIR:-/tmp\})/(?:[^\"$`/]|\$\$|/)*\"?")
_MKTEMP = re.compile(r"\"?\$\(mktemp(?:\s+-d)?\)\"?")


def _values(text: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for match in _ASSIGNMENT.finditer(text):
        found.setdefault(match.group(1), []).append(match.group(2))
    return found


def _bound_otherwise(text: str) -> set[str]:
    return {
        name for segment in _BINDERS.finditer(text) for name in re.findall(r"\w+", segment.group())
    }


def _integer_names(text: str) -> set[str]:
    """Names the script sets only to integers or to arithmetic expansions."""
    if _SOURCES.search(text):
        return set()
    other = _bound_otherwise(text)
    return {
        name
        for name, values in _values(text).items()
        if name not in other
        and all(_INTEGER.fullmatch(v) or _ARITHMETIC.fullmatch(v) for v in values)
    }


def _plain(expression: str, integers: set[str]) -> bool:
    if _BAD_DOLLAR.search(expression):
        return False  # $1, $#, $?: values from outside the script
    names = {m.group(1) for m in _NAME.finditer(expression) if not m.group(1)[0].isdigit()}
    return names <= integers


def rewrite_arithmetic(text: str) -> str:
    """``text`` with each accepted ``$(( ))`` replaced by zeros of the same length (words,
    lines and columns kept); the rest are left for the parser to refuse."""
    if "$((" not in text:
        return text
    integers = _integer_names(text)
    return _ARITHMETIC.sub(
        lambda m: "0" * len(m.group()) if _plain(m.group(1), integers) else m.group(), text
    )


def scratch_names(text: str) -> frozenset[str]:
    """Variables the script sets only to a path under ``$TMPDIR`` or to ``$(mktemp)``."""
    other = _bound_otherwise(text)
    return frozenset(
        name
        for name, values in _values(text).items()
        if name not in other
        and all((_TEMP_PATH.fullmatch(v) or _MKTEMP.fullmatch(v)) and ".." not in v for v in values)
    )


def is_scratch(value: str, names: frozenset[str]) -> bool:
    """``value`` (a word as the parser gives it) names the run's temp folder: a path under
    ``$TMPDIR``, or a scratch variable, alone or with more path after it."""
    if ".." in value.split("/"):
        return False
    if _TEMP_PATH.fullmatch(value):
        return True
    found = re.fullmatch(r"\$\{?([A-Za-z_]\w*)\}?(/[^$`]*)?", value)
    return found is not None and found.group(1) in names
