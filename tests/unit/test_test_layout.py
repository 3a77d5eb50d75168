"""The test suite's own house rule: a test module never imports another test module.

Importing one runs its module-level code and registers its fixtures a second time, and it
ties a test file's private helpers to every file that borrows them. Shared set-up lives in
helper modules (``tests/*_helpers.py``) or a ``conftest.py``.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def imported_test_modules(source: str) -> list[str]:
    """The test modules (``test_*``) that ``source`` imports."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found += [
            n for n in names if n.startswith("tests.") and n.split(".")[-1].startswith("test_")
        ]
    return found


def test_no_test_module_imports_another() -> None:
    borrowed = [
        f"{path.relative_to(TESTS)}: {name}"
        for path in sorted(TESTS.rglob("*.py"))
        for name in imported_test_modules(path.read_text(encoding="utf-8"))
    ]
    assert borrowed == [], "move what is shared into tests/*_helpers.py or a conftest.py"


def test_the_check_sees_every_form_of_import() -> None:
    source = (
        "from tests.integration.test_blocking_bus import wait_for\n"
        "import tests.unit.test_wire\n"
        "from tests.unit import test_wire\n"
        "from tests.fanout_helpers import spawn_worker\n"
    )
    assert imported_test_modules(source) == [
        "tests.integration.test_blocking_bus",
        "tests.unit.test_wire",
        "tests.unit.test_wire",
    ]
