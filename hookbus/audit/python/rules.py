"""The audit of agent-authored python, on the syntax tree (:mod:`ast`) instead of on text.

``getattr(__import__('o' + 's'), 'sys' + 'tem')('rm -rf /')`` matches no pattern, but its tree
says exactly what cannot be known before it runs. An agent-authored hook is refused for:

- ``python-unresolvable``: ``eval``/``exec``/``compile``, imports by computed name
  (``__import__(x)``, ``importlib.import_module(x)``), attributes by computed name
  (``getattr(m, x)``), ``globals()``/``vars()``, dunder escapes (``__builtins__``,
  ``__subclasses__``...), modules that run code the audit cannot see (``ctypes``, ``pickle``,
  ``marshal``, ``runpy``...), a command built at run time, and code that does not parse;
- ``write-outside-folder``: files written, moved or deleted anywhere but the hook folder
  (literal relative paths, or paths built from ``__file__`` / ``$HOOKBUS_HOOK_DIR``);
- ``credential-read``: credential files, secret-named variables, the whole environment;
- and whatever the commands it runs would be refused for (a literal ``os.system("...")`` or
  ``subprocess.run([...])`` is audited as shell by :mod:`hookbus.audit.shell.parse`).
"""

from __future__ import annotations

import ast

from hookbus.audit.python.names import PythonNames
from hookbus.audit.python.vocab import (
    DUNDERS,
    ENVIRONS,
    EXEC_RUNNERS,
    IMPORTERS,
    LOW_LEVEL_PREFIXES,
    NAMESPACES,
    OPAQUE_MODULES,
    OPENERS,
    PATH_WRITERS,
    PY_EVALUATORS,
    RISKY_ATTRIBUTES,
    SHELL_RUNNERS,
    WRITE_METHODS,
)
from hookbus.audit.shell.parse import scan_shell
from hookbus.audit.shell.vocab import (
    CREDENTIAL_PATHS,
    MAX_NESTING,
    MAX_PARSE_CHARS,
    SECRET_NAME,
)
from hookbus.audit.textscan import Sink

_UNRESOLVABLE = "python-unresolvable"


class _PythonAudit(PythonNames):
    def __init__(self, tree: ast.Module, sink: Sink, depth: int) -> None:
        super().__init__(tree)
        self.sink = sink
        self.depth = depth

    def report(self, rule: str, node: ast.AST, message: str) -> None:
        self.sink(rule, "critical", getattr(node, "lineno", None), message)

    def run(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                self._import(node)
            elif isinstance(node, ast.Call):
                self._call(node)
            elif isinstance(node, ast.Attribute):
                self._attribute(node)
            elif isinstance(node, ast.Name) and node.id in DUNDERS:
                self.report(_UNRESOLVABLE, node, f"{node.id}: reaches past the audit; remove it")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                found = CREDENTIAL_PATHS.search(node.value)
                if found:
                    self.report(
                        "credential-read",
                        node,
                        f"names {found.group(0)!r}, where credentials live: a hook must not "
                        "read them",
                    )

    # --- checks -----------------------------------------------------------------------

    def _import(self, node: ast.Import | ast.ImportFrom) -> None:
        names = (
            [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        )
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            self.report(
                _UNRESOLVABLE,
                node,
                f"from {node.module} import * hides what each name means: import names",
            )
        for name in names:
            if name.split(".")[0] in OPAQUE_MODULES:
                self.report(
                    _UNRESOLVABLE,
                    node,
                    f"imports {name}, which runs code the audit cannot see: remove it",
                )

    def _attribute(self, node: ast.Attribute) -> None:
        if node.attr in DUNDERS:
            self.report(_UNRESOLVABLE, node, f".{node.attr}: reaches past the audit; remove it")
            return
        if self.name_of(node) in ENVIRONS:
            self._environ_use(node)

    def _environ_use(self, node: ast.expr) -> None:
        parent = self.parents.get(node)
        if isinstance(parent, ast.Subscript) and parent.value is node:
            self._env_key(parent.slice, parent)
            return
        if isinstance(parent, ast.Attribute) and parent.attr == "get":
            call = self.parents.get(parent)
            if isinstance(call, ast.Call) and call.func is parent and call.args:
                self._env_key(call.args[0], call)
                return
        if isinstance(parent, ast.Compare) and node in parent.comparators:
            return
        self.report(
            "credential-read",
            node,
            "uses the whole environment (secrets included): read only the variables the hook "
            "needs, by name",
        )

    def _env_key(self, key: ast.expr, node: ast.AST) -> None:
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            self.report(
                "credential-read", node, "reads an environment variable whose name is computed"
            )
        elif SECRET_NAME.search(key.value):
            self.report(
                "credential-read",
                node,
                f"reads {key.value}, which looks like a secret: a hook gets only the variables "
                "the operator allows; remove it",
            )

    def _call(self, node: ast.Call) -> None:
        name = self.name_of(node.func)
        if name is None:
            return
        if name in PY_EVALUATORS:
            self.report(_UNRESOLVABLE, node, f"{name}() runs text as code: write the code itself")
        elif name in IMPORTERS:
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                if first.value.split(".")[0] in OPAQUE_MODULES or name.startswith(
                    ("runpy", "imp.", "importlib.util")
                ):
                    self.report(_UNRESOLVABLE, node, f"{name}({first.value!r}): remove it")
            else:
                self.report(
                    _UNRESOLVABLE, node, f"{name}() imports a module named at run time: import it"
                )
        elif name in ("getattr", "setattr", "delattr", "builtins.getattr"):
            attr = node.args[1] if len(node.args) > 1 else None
            if not (isinstance(attr, ast.Constant) and isinstance(attr.value, str)):
                self.report(
                    _UNRESOLVABLE,
                    node,
                    f"{name}() with an attribute named at run time: write the attribute",
                )
            elif attr.value in DUNDERS or attr.value in RISKY_ATTRIBUTES:
                self.report(
                    _UNRESOLVABLE,
                    node,
                    f"{name}(..., {attr.value!r}) reaches a code runner indirectly: call it "
                    "by name",
                )
        elif name in NAMESPACES:
            self.report(_UNRESOLVABLE, node, f"{name}() reaches names by computed keys")
        elif name == "os.getenv" and node.args:
            self._env_key(node.args[0], node)
        elif name in SHELL_RUNNERS or name in EXEC_RUNNERS:
            self._command(name, node)
        elif name.startswith(LOW_LEVEL_PREFIXES):
            self.report(
                _UNRESOLVABLE,
                node,
                f"{name}() starts processes below subprocess: use subprocess.run with a literal "
                "program",
            )
        elif name in OPENERS:
            self._open(node)
        elif name in PATH_WRITERS:
            for arg in node.args:
                self._inside(arg, node, name)
        elif isinstance(node.func, ast.Attribute) and node.func.attr in WRITE_METHODS:
            if self.name_of(node.func.value) not in ("os", "shutil"):
                self._inside(node.func.value, node, f".{node.func.attr}()")
        elif isinstance(node.func, ast.Attribute) and node.func.attr == "open":
            mode = self._mode(node, 0)
            if mode is None or any(c in mode for c in "wax+"):
                self._inside(node.func.value, node, ".open() for writing")

    def _mode(self, node: ast.Call, position: int) -> str | None:
        """The constant mode of an open call ("r" when none is given, None when computed)."""
        value: ast.expr | None = node.args[position] if len(node.args) > position else None
        for kw in node.keywords:
            if kw.arg == "mode":
                value = kw.value
        if value is None:
            return "r"
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            return value.value
        return None

    def _open(self, node: ast.Call) -> None:
        mode = self._mode(node, 1)
        if mode is not None and not any(c in mode for c in "wax+"):
            return
        if node.args:
            self._inside(node.args[0], node, "open() for writing")

    def _inside(self, expr: ast.expr, node: ast.AST, what: str) -> None:
        if not self.resolves_inside(expr, 0, 0):
            self.report(
                "write-outside-folder",
                node,
                f"{what} on a path that is not provably inside the hook folder: use a literal "
                "relative path, or build it from __file__ or $HOOKBUS_HOOK_DIR",
            )

    def _command(self, name: str, node: ast.Call) -> None:
        arg: ast.expr | None = node.args[0] if node.args else None
        shell = name in SHELL_RUNNERS
        for kw in node.keywords:
            if kw.arg in ("args", "cmd"):
                arg = kw.value
            if kw.arg == "shell":
                shell = not (isinstance(kw.value, ast.Constant) and not kw.value.value)
        text = self.command_text(arg, shell)
        if text is None:
            self.report(
                _UNRESOLVABLE,
                node,
                f"{name}() runs a command built at run time: give the program and its "
                "options literally",
            )
        elif self.depth >= MAX_NESTING:
            self.report(_UNRESOLVABLE, node, "commands nested too deep to audit")
        else:
            line = getattr(node, "lineno", 1)
            scan_shell(text, _at_line(self.sink, line), self.depth + 1)


def _at_line(sink: Sink, line: int) -> Sink:
    def at(rule: str, severity: str, _line: int | None, message: str) -> None:
        sink(rule, severity, line, message)

    return at


def scan_python(text: str, sink: Sink, depth: int = 0) -> None:
    """Parse ``text`` and report what an agent-authored hook may not do."""
    if len(text) > MAX_PARSE_CHARS:
        sink(_UNRESOLVABLE, "critical", None, "too large to audit")
        return
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        sink(
            _UNRESOLVABLE,
            "critical",
            getattr(exc, "lineno", None),
            f"the python parser cannot read this ({type(exc).__name__}): fix the syntax",
        )
        return
    _PythonAudit(tree, sink, depth).run()
