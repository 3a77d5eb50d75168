"""What the names and expressions of a python file refer to, as far as its syntax tree
shows: imports and simple assignments resolved (``o.system`` with ``import os as o`` is
``os.system``; ``run = subprocess.run`` makes ``run`` mean ``subprocess.run``), paths proved
to stay inside the hook folder, and command lines rebuilt from literal lists. The base of the
python audit (:mod:`hookbus.audit.python.rules`).
"""

from __future__ import annotations

import ast
import shlex
from collections.abc import Callable
from typing import Any

from hookbus.audit.python.vocab import (
    CWD,
    ENVIRONS,
    HOOK_DIR_GETTERS,
    PATH_BUILDERS,
    PATH_METHODS,
)
from hookbus.audit.shell.commands import escapes_folder
from hookbus.audit.shell.vocab import (
    PYTHONS,
    SHELLS,
)


class PythonNames:
    """One file's tree, with its names resolved."""

    def __init__(self, tree: ast.Module) -> None:
        self.aliases: dict[str, str] = {}
        self.assigned: dict[str, ast.expr] = {}
        self.parents: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self.aliases[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0]
                    )
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                if isinstance(target, ast.Name):
                    self.assigned[target.id] = node.value
        self.tree = tree
        # ``run = subprocess.run`` makes ``run`` mean ``subprocess.run``
        for local_name, value in list(self.assigned.items()):
            if isinstance(value, ast.Name | ast.Attribute):
                dotted = self.name_of(value)
                if dotted is not None and dotted != local_name:
                    self.aliases[local_name] = dotted

    def name_of(self, node: ast.expr) -> str | None:
        """The dotted name an expression refers to, imports resolved (``o.system`` with
        ``import os as o`` is ``os.system``; ``Path`` from pathlib is ``pathlib.Path``)."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        parts.append(self.aliases.get(node.id, node.id))
        return ".".join(reversed(parts))

    def resolves_inside(self, expr: ast.expr, depth: int, ups: int) -> bool:
        """Is ``expr`` a path inside the hook folder, as far as the tree shows? (``ups``:
        how many ``.parent`` / ``dirname`` steps were taken from ``__file__``.)"""
        if depth > 8:
            return False
        rule = _INSIDE_RULES.get(type(expr))
        return rule is not None and rule(self, expr, depth, ups)

    def _inside_constant(self, expr: ast.Constant, depth: int, ups: int) -> bool:
        if not isinstance(expr.value, str):
            return False
        return not escapes_folder(expr.value) and not expr.value.startswith("~")

    def _inside_name(self, expr: ast.Name, depth: int, ups: int) -> bool:
        if expr.id == "__file__":
            return True
        value = self.assigned.get(expr.id)
        return value is not None and self.resolves_inside(value, depth + 1, ups)

    def _inside_binop(self, expr: ast.BinOp, depth: int, ups: int) -> bool:
        if not isinstance(expr.op, ast.Add | ast.Div):
            return False
        return self.resolves_inside(expr.left, depth + 1, ups) and self.resolves_inside(
            expr.right, depth + 1, ups
        )

    def _inside_joined(self, expr: ast.JoinedStr, depth: int, ups: int) -> bool:
        parts = expr.values
        first = parts[0] if parts else None
        if isinstance(first, ast.Constant) and escapes_folder(str(first.value)):
            return False
        return all(
            self.resolves_inside(
                p.value if isinstance(p, ast.FormattedValue) else p, depth + 1, ups
            )
            for p in parts
        )

    def _inside_attribute(self, expr: ast.Attribute, depth: int, ups: int) -> bool:
        return (
            expr.attr == "parent"
            and ups < 1
            and self.resolves_inside(expr.value, depth + 1, ups + 1)
        )

    def _inside_subscript(self, expr: ast.Subscript, depth: int, ups: int) -> bool:
        return self.hook_dir_variable(expr, expr.slice)

    def _inside_call(self, expr: ast.Call, depth: int, ups: int) -> bool:
        name = self.name_of(expr.func)
        if name in CWD:
            return True
        if name in HOOK_DIR_GETTERS and expr.args:
            return self.hook_dir_variable(expr, expr.args[0])
        if name == "os.path.dirname":
            return ups < 1 and all(self.resolves_inside(a, depth + 1, ups + 1) for a in expr.args)
        method = isinstance(expr.func, ast.Attribute) and expr.func.attr in PATH_METHODS
        if name not in PATH_BUILDERS and not method:
            return False
        inner = list(expr.args)
        if isinstance(expr.func, ast.Attribute) and name not in PATH_BUILDERS:
            inner.insert(0, expr.func.value)
        return bool(inner) and all(self.resolves_inside(a, depth + 1, ups) for a in inner)

    def hook_dir_variable(self, node: ast.expr, key: ast.expr) -> bool:
        base = node.value if isinstance(node, ast.Subscript) else None
        if base is not None and self.name_of(base) not in ENVIRONS:
            return False
        return isinstance(key, ast.Constant) and key.value == "HOOKBUS_HOOK_DIR"

    def command_text(self, arg: ast.expr | None, shell: bool) -> str | None:
        """The command as shell text; computed arguments become ``"$ARG"`` (unknown but not
        code), a computed program or shell script is ``None`` (unresolvable)."""
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return arg.value
        if isinstance(arg, ast.Name) and arg.id in self.assigned:
            return self.command_text(self.assigned[arg.id], shell)
        if not isinstance(arg, ast.List | ast.Tuple) or not arg.elts:
            return None
        words: list[str] = []
        for i, elt in enumerate(arg.elts):
            if isinstance(elt, ast.Constant) and isinstance(elt.value, str | int | float):
                words.append(shlex.quote(str(elt.value)))
            elif i == 0:
                return None
            else:
                words.append('"$ARG"')
        program = shlex.split(words[0])[0].rsplit("/", 1)[-1] if words[0] else ""
        if (program in SHELLS or program in PYTHONS) and '"$ARG"' in words:
            return None  # the code a shell or python runs would be computed
        return " ".join(words)


#: How each kind of expression is proved to stay inside the hook folder; any other kind
#: is not (a computed path is outside until shown otherwise).
_INSIDE_RULES: dict[type, Callable[[PythonNames, Any, int, int], bool]] = {
    ast.Constant: PythonNames._inside_constant,
    ast.Name: PythonNames._inside_name,
    ast.BinOp: PythonNames._inside_binop,
    ast.JoinedStr: PythonNames._inside_joined,
    ast.Attribute: PythonNames._inside_attribute,
    ast.Subscript: PythonNames._inside_subscript,
    ast.Call: PythonNames._inside_call,
}
