"""The audit of agent-authored shell, on a parse tree (bashlex) instead of on text.

Patterns over text miss what a shell resolves at run time: ``$'\\x72m' -rf /``, ``r''m``,
``x=rm; $x -rf /``, ``base64 -d | sh``. Here the script is parsed the way bash would parse it,
and an agent-authored hook is refused when the audit cannot tell what it will run or touch:

- ``shell-unresolvable``: ``eval`` (and ``trap``/``alias`` strings), a command position that
  is an expansion (``$x``, ``$(...)``, ``${!x}``), ``sh -c``/``python -c`` with a computed
  program, ``source`` of anything but a literal file of the hook, inline perl/ruby/node
  programs, escape-built ANSI-C strings, and scripts that do not parse;
- ``pipe-to-shell``: a shell or interpreter that reads its program from a pipe, a here-doc,
  a process substitution or the event on stdin (``base64 -d | sh``, ``bash <(curl ...)``);
- ``write-outside-folder``: a redirection or a writing command (``tee``, ``cp``, ``rm``,
  ``sed -i``...) whose target is not a literal path inside the hook folder (or under
  ``$HOOKBUS_HOOK_DIR``);
- ``credential-read``: credential files (``~/.ssh``, ``~/.aws``, ``/proc/*/environ``...),
  secret-named variables (``$AWS_SECRET_ACCESS_KEY``), or a dump of the environment.

Every simple command is also rebuilt from its resolved words and run through the text rules
(:func:`hookbus.audit.shell.rules.scan_dangerous`), so ``\\rm -rf /`` is an ``rm-rf``.
"""

from __future__ import annotations

import codecs
import os
import re
import shlex
from collections.abc import Iterator
from typing import Any

import bashlex

from hookbus.audit.shell import bindings, effects, runners
from hookbus.audit.shell.effects import DUMP_MESSAGE, UNRESOLVABLE, is_literal
from hookbus.audit.shell.normalize import rewrite
from hookbus.audit.shell.rules import scan_dangerous
from hookbus.audit.shell.vocab import (
    ANSI_C,
    ENV_DUMPERS,
    MAX_NESTING,
    MAX_PARSE_CHARS,
    OPAQUE_ESCAPE,
    PREFIX_VALUE,
    PREFIXES,
    PYTHONS,
    SAFE_PY_MODULES,
    SHELLS,
)
from hookbus.audit.textscan import Sink

#: Scripts longer than this are not parsed (refused for agents: too large to audit).


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, max(pos, 0)) + 1


def _walk(node: Any) -> Iterator[Any]:
    """Every node under ``node`` (itself included), depth first."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        for attr in ("parts", "list"):
            children = getattr(current, attr, None)
            if isinstance(children, list):
                stack.extend(reversed(children))
        for attr in ("command", "output", "heredoc"):
            child = getattr(current, attr, None)
            if child is not None and hasattr(child, "kind"):
                stack.append(child)


class _ShellAudit:
    """One parse of one text, reporting through ``sink``."""

    def __init__(self, text: str, sink: Sink, depth: int, line_offset: int) -> None:
        self.text = text
        self.sink = sink
        self.depth = depth
        self.line_offset = line_offset
        self.scratch: frozenset[str] = frozenset()

    def report(self, rule: str, pos: int, message: str) -> None:
        self.sink(rule, "critical", _line(self.text, pos) + self.line_offset, message)

    def run(self) -> None:
        if self.depth:  # a payload (sh -c '...', os.system('...')): the text rules too
            scan_dangerous(self.text, self._shifted())
        self._ansi_c()
        if len(self.text) > MAX_PARSE_CHARS:
            self.report(UNRESOLVABLE, 0, f"over {MAX_PARSE_CHARS} characters: too large to audit")
            return
        # case statements and quoted here-doc delimiters, which bashlex cannot read, become
        # plain commands with the same words and lines
        self.text = rewrite(self.text)
        self.scratch = bindings.scratch_names(self.text)
        try:
            trees = bashlex.parse(self.text)
        except (Exception, RecursionError) as exc:
            reason = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
            self.report(
                UNRESOLVABLE,
                0,
                f"the shell parser cannot read this ({reason}); an agent-authored hook must be "
                "plain enough to audit: avoid [[ ]], $(( )) and arrays, or write the "
                "handler in python",
            )
            return
        for tree in trees:
            for node in _walk(tree):
                kind = node.kind
                if kind == "pipeline":
                    self._pipeline(node)
                elif kind == "command":
                    self._command(node, stdin_piped=False)
                elif kind == "parameter":
                    effects.parameter(self.report, node)
                elif kind == "processsubstitution":
                    pass  # judged where it is used (an argument of a shell or source)
                elif kind == "word" or kind == "assignment":
                    effects.credential_text(self.report, node.word, node.pos[0])
                    if kind == "assignment":
                        effects.startup_assignment(self.report, node.word, node.pos[0])

    # --- pieces -----------------------------------------------------------------------

    def _ansi_c(self) -> None:
        """bashlex does not read ``$'...'``: refuse opaque escapes, and run the text rules
        on the line with every ANSI-C string decoded."""
        for found in ANSI_C.finditer(self.text):
            if OPAQUE_ESCAPE.search(found.group(1)):
                self.report(
                    UNRESOLVABLE,
                    found.start(),
                    "an ANSI-C string spelled with escapes ($'\\x..'): it hides what runs from "
                    "a reviewer; write the text plainly",
                )
            try:
                decoded = codecs.decode(found.group(1), "unicode_escape")
            except (UnicodeDecodeError, ValueError):
                continue
            start = self.text.rfind("\n", 0, found.start()) + 1
            end = self.text.find("\n", found.end())
            line = self.text[start : found.start()] + decoded
            line += self.text[found.end() :] if end < 0 else self.text[found.end() : end]
            where = _line(self.text, found.start()) + self.line_offset
            scan_dangerous(line.replace("\n", " "), self._at(where))

    def _shifted(self) -> Sink:
        def sink(rule: str, severity: str, line: int | None, message: str) -> None:
            self.sink(rule, severity, (line or 1) + self.line_offset, message)

        return sink

    def _at(self, line: int) -> Sink:
        def sink(rule: str, severity: str, _line: int | None, message: str) -> None:
            self.sink(rule, severity, line, message)

        return sink

    def _pipeline(self, node: Any) -> None:
        commands = [p for p in node.parts if p.kind == "command"]
        for command in commands[1:]:
            self._command(command, stdin_piped=True, from_pipeline=True)

    def _command(self, node: Any, *, stdin_piped: bool, from_pipeline: bool = False) -> None:
        """One simple command (a pipeline's later stages are called again with stdin_piped,
        which only adds the pipe-to-shell check)."""
        words = [p for p in node.parts if p.kind == "word"]
        redirects = [p for p in node.parts if p.kind == "redirect"]
        if not from_pipeline:
            for redirect in redirects:
                effects.redirect(self.report, redirect, self.scratch)
            self._rescan(node, words)
        argv = self._strip_prefixes(words)
        if not argv:
            first = words[0] if words else None
            if not from_pipeline and first is not None and is_literal(first):
                name = os.path.basename(first.word)
                if name in ENV_DUMPERS and effects.dumps_environment(name, words[1:]):
                    self.report("credential-read", first.pos[0], DUMP_MESSAGE.format(name))
            return
        program = argv[0]
        if not is_literal(program):
            if not from_pipeline:
                self.report(
                    UNRESOLVABLE,
                    program.pos[0],
                    f"the program to run is computed at run time ({program.word!r}): name the "
                    "program literally",
                )
            return
        name = os.path.basename(program.word)
        args = argv[1:]
        stdin_fed = stdin_piped or any(r.type in ("<", "<<", "<<<", "<<-", "<&") for r in redirects)
        if name in SHELLS or name in PYTHONS:
            self._interpreter(name, program, args, stdin_fed=stdin_fed, judge=not from_pipeline)
            return
        if from_pipeline:
            return
        runners.judge(self.report, name, program, args, self._nested)
        effects.program_effects(self.report, name, program, args, self.scratch)

    def _nested(self, words: list[Any]) -> None:
        """Audit ``words`` as a command line of their own (what ``find -exec`` or ``xargs``
        runs)."""
        if not all(is_literal(w) for w in words):
            self.report(UNRESOLVABLE, words[0].pos[0], "runs a command built at run time")
        elif self.depth >= MAX_NESTING:
            self.report(UNRESOLVABLE, words[0].pos[0], "commands nested too deep to audit")
        else:
            offset = _line(self.text, words[0].pos[0]) - 1 + self.line_offset
            text = shlex.join(w.word for w in words)
            _ShellAudit(text, self.sink, self.depth + 1, offset).run()

    def _strip_prefixes(self, words: list[Any]) -> list[Any]:
        """Drop ``env A=1``, ``nice -n 5``, ``timeout 5``, ``taskset -c 0``... before the
        program; a variable set on the way is judged (``env BASH_ENV=... bash``)."""
        i = 0
        while i < len(words) and is_literal(words[i]):
            base = os.path.basename(words[i].word)
            if base not in PREFIXES:
                break
            i += 1
            while i < len(words) and is_literal(words[i]):
                word = words[i].word
                if re.fullmatch(r"[A-Za-z_]\w*=.*", word, re.DOTALL):
                    effects.startup_assignment(self.report, word, words[i].pos[0])
                elif base == "env" and word.startswith(("-S", "--split-string")):
                    self.report(
                        UNRESOLVABLE,
                        words[i].pos[0],
                        "env -S runs a command line given as one string",
                    )
                elif not (word.startswith("-") or PREFIX_VALUE.fullmatch(word)):
                    break
                i += 1
        return words[i:]

    def _interpreter(
        self, name: str, program: Any, args: list[Any], *, stdin_fed: bool, judge: bool
    ) -> None:
        """A shell or python: its program must be a literal file of the hook or literal
        inline code (audited in turn), never stdin or a process substitution."""
        kind, word = _program_source(name, args)
        if kind == "module":
            self._module(name, program, word)
        elif kind == "stdin":
            if stdin_fed or judge:
                self.report(
                    "pipe-to-shell",
                    program.pos[0],
                    f"{name} reads the program it runs from its input (a pipe, a here-doc or "
                    "the event itself): put the code in a file of the hook and run that",
                )
        elif not judge:
            return
        elif kind == "inline":
            self._inline(name, word)
        else:
            effects.local_code(self.report, name, word)

    def _module(self, name: str, program: Any, module: Any) -> None:
        """``python -m MODULE``: only modules whose arguments are data."""
        if module is None or not is_literal(module) or module.word not in SAFE_PY_MODULES:
            self.report(
                UNRESOLVABLE,
                program.pos[0],
                f"{name} -m runs a module that may take code as arguments (timeit, pdb, "
                f"cProfile...); allowed: {', '.join(sorted(SAFE_PY_MODULES))}",
            )

    def _inline(self, name: str, inline: Any) -> None:
        """``sh -c TEXT`` / ``python -c TEXT``: a literal program, audited in turn."""
        if not is_literal(inline):
            self.report(
                UNRESOLVABLE,
                inline.pos[0],
                f"{name} -c runs a program built at run time: write it literally",
            )
        elif self.depth >= MAX_NESTING:
            self.report(UNRESOLVABLE, inline.pos[0], "shells nested too deep to audit")
        elif name in SHELLS:
            offset = _line(self.text, inline.pos[0]) - 1 + self.line_offset
            _ShellAudit(inline.word, self.sink, self.depth + 1, offset).run()
        else:
            from hookbus.audit.python.rules import scan_python  # python_rules imports this

            where = _line(self.text, inline.pos[0]) + self.line_offset
            scan_python(inline.word, self._at(where), self.depth + 1)

    def _rescan(self, node: Any, words: list[Any]) -> None:
        """The command as bash will run it, through the text rules: quote removal and
        escapes no longer hide ``rm -rf /``."""
        if not words or not all(is_literal(w) for w in words):
            return
        resolved = shlex.join(w.word for w in words)
        original = self.text[node.pos[0] : node.pos[1]]
        if resolved != original:
            scan_dangerous(resolved, self._at(_line(self.text, node.pos[0]) + self.line_offset))


def _program_source(name: str, args: list[Any]) -> tuple[str, Any]:
    """Where a shell or python takes its program from: ``("inline", word)`` (``-c``),
    ``("module", word)`` (python ``-m``), ``("file", word)`` or ``("stdin", None)``."""
    for i, word in enumerate(args):
        value = word.word if is_literal(word) else None
        if value is None or not value.startswith("-") or value == "-":
            if value == "-":
                return "stdin", None
            return "file", word
        if value.startswith("--"):
            continue
        if "c" in value[1:]:
            return "inline", args[i + 1] if i + 1 < len(args) else word
        if name in PYTHONS and "m" in value[1:]:
            return "module", args[i + 1] if i + 1 < len(args) else None
    return "stdin", None


def scan_shell(text: str, sink: Sink, depth: int = 0, line_offset: int = 0) -> None:
    """Parse ``text`` (a script or a command line) and report what an agent may not do."""
    _ShellAudit(text, sink, depth, line_offset).run()
