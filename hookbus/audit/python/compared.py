"""String literals a Python handler only compares its input against, blanked out before the
shell text rules read the file.

A guard is full of the very text it guards against: ``if "curl" in cmd and "| sh" in cmd``,
``cmd.startswith("rm -rf")``, ``re.search(r"git push .*--force", cmd)``. The shell text rules
read a Python file line by line, so such a guard was refused as if it ran a download through a
shell. A literal that is an operand of a comparison (``==``, ``!=``, ``in``, ``not in``, an
ordering), the needle of a string method, or a regular expression's pattern is data that is
never run, so it is replaced by spaces (lines and columns kept) before those rules read the
text. Every other literal (a command, a file's contents, a dictionary value) stays, and what a
handler runs is audited as shell where it is run.
"""

from __future__ import annotations

import ast

#: Methods whose first argument is a needle or a pattern, never something run.
NEEDLE_METHODS = frozenset(
    {
        "startswith",
        "endswith",
        "find",
        "rfind",
        "index",
        "rindex",
        "count",
        "search",
        "match",
        "fullmatch",
        "findall",
        "finditer",
        "compile",
    }
)


def _literals(node: ast.expr) -> list[ast.Constant]:
    """``node`` itself when it is a string literal, or the string literals of a literal
    tuple, list or set (``cmd in ("reboot", "halt")``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [n for item in node.elts for n in _literals(item)]
    return []


def _compared(tree: ast.AST) -> list[ast.Constant]:
    found: list[ast.Constant] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                found += _literals(operand)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in NEEDLE_METHODS
            and node.args
        ):
            found += _literals(node.args[0])
    return found


def blank_compared(text: str) -> str:
    """``text`` with every compared-only string literal on one line replaced by spaces
    (unchanged when it does not parse: the parsed audit refuses that on its own)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return text
    lines = text.splitlines(keepends=True)
    spans: dict[int, list[tuple[int, int]]] = {}
    for node in _compared(tree):
        if node.end_lineno != node.lineno or node.end_col_offset is None:
            continue  # a literal over several lines stays as it is
        spans.setdefault(node.lineno - 1, []).append((node.col_offset, node.end_col_offset))
    for index, ranges in spans.items():
        if index >= len(lines):
            continue
        raw = bytearray(lines[index].encode())  # ast offsets count UTF-8 bytes
        for start, end in ranges:
            raw[start:end] = b" " * (end - start)
        lines[index] = raw.decode(errors="replace")
    return "".join(lines)
