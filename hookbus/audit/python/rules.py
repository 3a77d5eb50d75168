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
import re
from collections.abc import Callable
from typing import Any

from hookbus.audit.python.names import PythonNames
from hookbus.audit.python.vocab import (
    ATTRIBUTE_GETTERS,
    DUNDERS,
    ENVIRONS,
    EXEC_RUNNERS,
    IMPORTERS,
    LOW_LEVEL_PREFIXES,
    MODULE_TABLES,
    NAMESPACES,
    OPAQUE_MODULES,
    OPENERS,
    PATH_WRITERS,
    PY_EVALUATORS,
    RISKY_ATTRIBUTES,
    SAFE_ENCODINGS,
    SHELL_RUNNERS,
    UNIX_SOCKETS,
    UNSAFE_LOADERS,
    WRITE_METHODS,
)
from hookbus.audit.shell.parse import scan_shell
from hookbus.audit.shell.runners import HOST_SOCKET
from hookbus.audit.shell.vocab import (
    CREDENTIAL_PATHS,
    MAX_NESTING,
    MAX_PARSE_CHARS,
    SECRET_NAME,
)
from hookbus.audit.textscan import Sink

_UNRESOLVABLE = "python-unresolvable"


_COOKIE = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.ASCII)
_RUNNER_VALUE = (
    "is passed around as a value (a thread target, map, partial, a list): call it by name "
    "with literal arguments, where the audit can read them"
)


def _is_runner(name: str) -> bool:
    return (
        name in SHELL_RUNNERS
        or name in EXEC_RUNNERS
        or name in PY_EVALUATORS
        or name.startswith(LOW_LEVEL_PREFIXES)
    )


class _PythonAudit(PythonNames):
    def __init__(self, tree: ast.Module, sink: Sink, depth: int) -> None:
        super().__init__(tree)
        self.sink = sink
        self.depth = depth

    def report(self, rule: str, node: ast.AST, message: str) -> None:
        self.sink(rule, "critical", getattr(node, "lineno", None), message)

    def run(self) -> None:
        for node in ast.walk(self.tree):
            check = _NODE_RULES.get(type(node))
            if check is not None:
                check(self, node)

    # --- node rules (one per node type, see _NODE_RULES) ------------------------------

    def _name(self, node: ast.Name) -> None:
        if node.id in DUNDERS:
            self.report(_UNRESOLVABLE, node, f"{node.id}: reaches past the audit; remove it")
            return
        self._reference(node)

    def _constant(self, node: ast.Constant) -> None:
        if not isinstance(node.value, str):
            return
        found = CREDENTIAL_PATHS.search(node.value)
        if found:
            self.report(
                "credential-read",
                node,
                f"names {found.group(0)!r}, where credentials live: a hook must not read them",
            )

    def _reference(self, node: ast.Name | ast.Attribute) -> None:
        """What a name refers to, wherever it is used: module tables, unsafe loaders, unix
        sockets, and runners handed on as values instead of called."""
        name = self.name_of(node)
        if name is None:
            return
        if name in MODULE_TABLES:
            self.report(_UNRESOLVABLE, node, f"{name} reaches modules or frames by key: remove it")
        elif name in UNSAFE_LOADERS:
            self.report(
                _UNRESOLVABLE,
                node,
                f"{name} builds any object from text (and runs it): use yaml.safe_load",
            )
        elif name in UNIX_SOCKETS:
            self.report(
                HOST_SOCKET,
                node,
                f"{name}: a unix socket reaches services on the host; a hook reaches none",
            )
        elif _is_runner(name) and not self._called(node):
            self.report(_UNRESOLVABLE, node, f"{name} {_RUNNER_VALUE}")

    def _called(self, node: ast.expr) -> bool:
        parent = self.parents.get(node)
        if isinstance(parent, ast.Call) and parent.func is node:
            return True
        # the inner part of a longer dotted name (``os`` in ``os.system``) is not a value
        return isinstance(parent, ast.Attribute) and parent.value is node

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
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                dotted = f"{node.module}.{alias.name}"
                if dotted in MODULE_TABLES or dotted in UNSAFE_LOADERS or _is_runner(dotted):
                    continue  # judged where the name is used
                if dotted in UNIX_SOCKETS:
                    self.report(HOST_SOCKET, node, f"imports {dotted}: a unix socket")

    def _attribute(self, node: ast.Attribute) -> None:
        if node.attr in DUNDERS:
            self.report(_UNRESOLVABLE, node, f".{node.attr}: reaches past the audit; remove it")
            return
        if self.name_of(node) in ENVIRONS:
            self._environ_use(node)
            return
        self._reference(node)

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
        for applies, rule in _CALL_RULES:
            if applies(name, node):
                rule(self, name, node)
                return

    # --- call rules (see _CALL_RULES) -------------------------------------------------

    def _evaluator(self, name: str, node: ast.Call) -> None:
        self.report(_UNRESOLVABLE, node, f"{name}() runs text as code: write the code itself")

    def _importer(self, name: str, node: ast.Call) -> None:
        first = node.args[0] if node.args else None
        if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
            self.report(
                _UNRESOLVABLE, node, f"{name}() imports a module named at run time: import it"
            )
        elif first.value.split(".")[0] in OPAQUE_MODULES or name.startswith(
            ("runpy", "imp.", "importlib.util")
        ):
            self.report(_UNRESOLVABLE, node, f"{name}({first.value!r}): remove it")

    def _getter(self, name: str, node: ast.Call) -> None:
        index = 0 if name.startswith("operator.") else 1
        attr = node.args[index] if len(node.args) > index else None
        if not (isinstance(attr, ast.Constant) and isinstance(attr.value, str)):
            self.report(
                _UNRESOLVABLE, node, f"{name}() with an attribute named at run time: write it"
            )
        elif attr.value in DUNDERS or attr.value in RISKY_ATTRIBUTES:
            self.report(
                _UNRESOLVABLE,
                node,
                f"{name}(..., {attr.value!r}) reaches a code runner indirectly: call it by name",
            )

    def _namespace(self, name: str, node: ast.Call) -> None:
        self.report(_UNRESOLVABLE, node, f"{name}() reaches names by computed keys")

    def _getenv(self, name: str, node: ast.Call) -> None:
        self._env_key(node.args[0], node)

    def _low_level(self, name: str, node: ast.Call) -> None:
        self.report(
            _UNRESOLVABLE,
            node,
            f"{name}() starts processes below subprocess: use subprocess.run with a literal "
            "program",
        )

    def _path_writer(self, name: str, node: ast.Call) -> None:
        for arg in node.args:
            self._inside(arg, node, name)

    def _write_method(self, name: str, node: ast.Call) -> None:
        func = node.func
        assert isinstance(func, ast.Attribute)
        if self.name_of(func.value) not in ("os", "shutil"):
            self._inside(func.value, node, f".{func.attr}()")

    def _open_method(self, name: str, node: ast.Call) -> None:
        func = node.func
        assert isinstance(func, ast.Attribute)
        mode = self._mode(node, 0)
        if mode is None or any(c in mode for c in "wax+"):
            self._inside(func.value, node, ".open() for writing")

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

    def _open(self, name: str, node: ast.Call) -> None:
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


def _attr_is(attrs: frozenset[str] | str) -> Callable[[str, ast.Call], bool]:
    wanted = frozenset({attrs}) if isinstance(attrs, str) else attrs

    def applies(_name: str, node: ast.Call) -> bool:
        return isinstance(node.func, ast.Attribute) and node.func.attr in wanted

    return applies


_CallRule = Callable[[_PythonAudit, str, ast.Call], None]
#: The call rules, first match wins: (applies to (name, call), rule).
_CALL_RULES: tuple[tuple[Callable[[str, ast.Call], bool], _CallRule], ...] = (
    (lambda name, _node: name in PY_EVALUATORS, _PythonAudit._evaluator),
    (lambda name, _node: name in IMPORTERS, _PythonAudit._importer),
    (lambda name, _node: name in ATTRIBUTE_GETTERS, _PythonAudit._getter),
    (lambda name, _node: name in NAMESPACES, _PythonAudit._namespace),
    (lambda name, node: name == "os.getenv" and bool(node.args), _PythonAudit._getenv),
    (lambda name, _node: name in SHELL_RUNNERS or name in EXEC_RUNNERS, _PythonAudit._command),
    (lambda name, _node: name.startswith(LOW_LEVEL_PREFIXES), _PythonAudit._low_level),
    (lambda name, _node: name in OPENERS, _PythonAudit._open),
    (lambda name, _node: name in PATH_WRITERS, _PythonAudit._path_writer),
    (_attr_is(WRITE_METHODS), _PythonAudit._write_method),
    (_attr_is("open"), _PythonAudit._open_method),
)
_NODE_RULES: dict[type, Callable[[_PythonAudit, Any], None]] = {
    ast.Import: _PythonAudit._import,
    ast.ImportFrom: _PythonAudit._import,
    ast.Call: _PythonAudit._call,
    ast.Attribute: _PythonAudit._attribute,
    ast.Name: _PythonAudit._name,
    ast.Constant: _PythonAudit._constant,
}


def _at_line(sink: Sink, line: int) -> Sink:
    def at(rule: str, severity: str, _line: int | None, message: str) -> None:
        sink(rule, severity, line, message)

    return at


def _cookie(text: str) -> tuple[int, str] | None:
    """(line, encoding) of a PEP 263 encoding declaration in the first two lines."""
    for number, line in enumerate(text.splitlines()[:2], start=1):
        found = _COOKIE.match(line)
        if found:
            return number, found.group(1)
        if line.strip() and not line.lstrip().startswith("#"):
            return None
    return None


def scan_python(text: str, sink: Sink, depth: int = 0) -> None:
    """Parse ``text`` and report what an agent-authored hook may not do."""
    if len(text) > MAX_PARSE_CHARS:
        sink(_UNRESOLVABLE, "critical", None, "too large to audit")
        return
    cookie = _cookie(text) if depth == 0 else None
    if cookie is not None and cookie[1].lower().replace("_", "-") not in SAFE_ENCODINGS:
        # Python would decode the file as declared; the audit reads it as UTF-8, so the two
        # could see different programs (utf-7 turns "+AAo-" into a new line)
        sink(
            _UNRESOLVABLE,
            "critical",
            cookie[0],
            f"declares the encoding {cookie[1]!r}: python would read this file differently "
            "from the audit; remove the declaration (UTF-8 is the default)",
        )
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
