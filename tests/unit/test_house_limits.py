"""The house limits of ``hookbus/``: small modules in small folders, no tangled function.

A module over 500 lines holds several concepts; a folder of more than 15 modules is a
subpackage waiting to be made; a median module over 150 lines means most of them are too
long to read in one sitting; a function over McCabe complexity 25 cannot be followed branch
by branch. These tests hold the package to those limits, so a change that crosses one says
so here instead of in a review.
"""

from __future__ import annotations

import ast
import statistics
import textwrap
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "hookbus"

#: Most lines a module may have.
MAX_MODULE_LINES = 500
#: Most modules (``__init__.py`` and ``__main__.py`` not counted) one folder may hold.
MAX_FOLDER_MODULES = 15
#: Highest median module length, over every ``.py`` file of the package: most modules hold
#: one concept in a screenful or three.
MAX_MEDIAN_LINES = 150
#: Highest McCabe complexity of one function.
MAX_COMPLEXITY = 25
#: Folders whose functions are not yet held to :data:`MAX_COMPLEXITY` (none now: add one
#: only with the reason, and remove it once the folder passes).
COMPLEXITY_EXEMPT: tuple[str, ...] = ()


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def complexity(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """McCabe complexity: 1, plus one per branch point (``if``, conditional expression,
    loop, ``except``, ``case``, comprehension and its ``if``), plus one per extra operand
    of ``and``/``or``. Nested functions and lambdas count on their own."""
    count = 1
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(
            node,
            (
                ast.If,
                ast.IfExp,
                ast.For,
                ast.AsyncFor,
                ast.While,
                ast.ExceptHandler,
                ast.match_case,
            ),
        ):
            count += 1
        elif isinstance(node, ast.BoolOp):
            count += len(node.values) - 1
        elif isinstance(node, ast.comprehension):
            count += 1 + len(node.ifs)
        stack.extend(ast.iter_child_nodes(node))
    return count


def _too_complex(source: str, where: str) -> list[str]:
    return [
        f"{where}:{node.lineno} {node.name}: complexity {complexity(node)}"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and complexity(node) > MAX_COMPLEXITY
    ]


def test_no_module_is_over_500_lines() -> None:
    long = [f"{p.relative_to(PACKAGE)}: {_lines(p)}" for p in _modules() if _lines(p) > 500]
    assert long == [], "split these along their concepts"


def test_no_folder_holds_more_than_15_modules() -> None:
    crowded = []
    for folder in sorted({p.parent for p in _modules()}):
        count = len(
            [p for p in folder.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
        )
        if count > MAX_FOLDER_MODULES:
            crowded.append(f"{folder.relative_to(PACKAGE)}: {count}")
    assert crowded == [], "group these by subsystem"


def test_the_median_module_stays_within_its_bound() -> None:
    assert statistics.median(_lines(p) for p in _modules()) <= MAX_MEDIAN_LINES


def test_no_function_outside_the_exempt_folders_is_over_complexity_25() -> None:
    found: list[str] = []
    for path in _modules():
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] in COMPLEXITY_EXEMPT:
            continue
        found += _too_complex(path.read_text(encoding="utf-8"), str(relative))
    assert found == [], "split these into functions a reader can follow"


def test_the_complexity_count_sees_branches_loops_handlers_and_boolean_operands() -> None:
    source = textwrap.dedent(
        """
        def f(a, b):
            if a and b or a:            # if: 1, and/or: 2
                pass
            for x in a:                 # 1
                while b:                # 1
                    pass
            try:
                pass
            except ValueError:          # 1
                pass
            y = [i for i in a if i]     # comprehension and its if: 2
            def inner(): return 1 if a else 2   # not counted in f
            return y if a else b        # 1
        """
    )
    function = ast.parse(source).body[0]
    assert isinstance(function, ast.FunctionDef)
    assert complexity(function) == 10
    branches = "\n".join(f"    if a == {i}:\n        return {i}" for i in range(MAX_COMPLEXITY))
    assert _too_complex(f"def g(a):\n{branches}\n    return -1\n", "m.py") == [
        "m.py:1 g: complexity 26"
    ]


def _all_below_a_definition(path: Path) -> bool:
    body = ast.parse(path.read_text()).body
    names = [
        i
        for i, node in enumerate(body)
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
    ]
    defs = [
        i
        for i, node in enumerate(body)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    ]
    return bool(names and defs) and names[0] > defs[0]


def test_a_modules_public_names_are_listed_above_its_definitions() -> None:
    late = [
        str(p.relative_to(PACKAGE))
        for p in sorted(PACKAGE.rglob("*.py"))
        if _all_below_a_definition(p)
    ]
    assert late == [], "move __all__ up, under the imports"
