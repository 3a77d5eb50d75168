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
(:func:`hookbus.audit.shell_rules.scan_dangerous`), so ``\\rm -rf /`` is an ``rm-rf``.
"""

from __future__ import annotations

import codecs
import os
import re
import shlex
from collections.abc import Iterator
from typing import Any

import bashlex

from hookbus.audit.agent_vocab import (
    ANSI_C,
    CREDENTIAL_PATHS,
    ENV_DUMPERS,
    HOOK_DIR_VAR,
    INLINE_INTERPRETERS,
    MAX_NESTING,
    MAX_PARSE_CHARS,
    OPAQUE_ESCAPE,
    PREFIXES,
    PYTHONS,
    SAFE_DEVICES,
    SECRET_NAME,
    SH_EVALUATORS,
    SHELLS,
    WRITERS,
)
from hookbus.audit.shell_commands import escapes_folder, is_system_program
from hookbus.audit.shell_rules import scan_dangerous
from hookbus.audit.textscan import Sink

#: Scripts longer than this are not parsed (refused for agents: too large to audit).

_UNRESOLVABLE = "shell-unresolvable"
_DUMP_MESSAGE = (
    "{} prints the whole environment, secrets included: print only the variables the hook needs"
)


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, max(pos, 0)) + 1


def _is_literal(word: Any) -> bool:
    """A word with nothing to expand at run time (a ``~`` aside)."""
    return all(p.kind == "tilde" for p in getattr(word, "parts", []) or [])


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

    def report(self, rule: str, pos: int, message: str) -> None:
        self.sink(rule, "critical", _line(self.text, pos) + self.line_offset, message)

    def run(self) -> None:
        if self.depth:  # a payload (sh -c '...', os.system('...')): the text rules too
            scan_dangerous(self.text, self._shifted())
        self._ansi_c()
        if len(self.text) > MAX_PARSE_CHARS:
            self.report(_UNRESOLVABLE, 0, f"over {MAX_PARSE_CHARS} characters: too large to audit")
            return
        try:
            trees = bashlex.parse(self.text)
        except (Exception, RecursionError) as exc:
            reason = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
            self.report(
                _UNRESOLVABLE,
                0,
                f"the shell parser cannot read this ({reason}); an agent-authored hook must be "
                "plain enough to audit: avoid case, [[ ]], $(( )) and arrays, or write the "
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
                    self._parameter(node)
                elif kind == "processsubstitution":
                    pass  # judged where it is used (an argument of a shell or source)
                elif kind == "word" or kind == "assignment":
                    self._credential_text(node.word, node.pos[0])

    # --- pieces -----------------------------------------------------------------------

    def _ansi_c(self) -> None:
        """bashlex does not read ``$'...'``: refuse opaque escapes, and run the text rules
        on the line with every ANSI-C string decoded."""
        for found in ANSI_C.finditer(self.text):
            if OPAQUE_ESCAPE.search(found.group(1)):
                self.report(
                    _UNRESOLVABLE,
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

    def _parameter(self, node: Any) -> None:
        value = str(getattr(node, "value", ""))
        if value.startswith("!"):
            self.report(
                _UNRESOLVABLE,
                node.pos[0],
                f"${{{value}}} names a variable by another variable's value: write the name",
            )
            return
        name = re.match(r"[#]?([A-Za-z_][A-Za-z0-9_]*)", value)
        if name and SECRET_NAME.search(name.group(1)):
            self.report(
                "credential-read",
                node.pos[0],
                f"reads ${name.group(1)}, which looks like a secret: a hook gets only the "
                "variables the operator allows; remove it",
            )

    def _credential_text(self, text: str, pos: int) -> None:
        found = CREDENTIAL_PATHS.search(text)
        if found:
            self.report(
                "credential-read",
                pos,
                f"touches {found.group(0)!r}, where credentials live: a hook must not read them",
            )

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
                self._redirect(redirect)
            self._rescan(node, words)
        argv = self._strip_prefixes(words)
        if not argv:
            first = words[0] if words else None
            if not from_pipeline and first is not None and _is_literal(first):
                name = os.path.basename(first.word)
                if name in ENV_DUMPERS and self._dumps_environment(name, words[1:]):
                    self.report("credential-read", first.pos[0], _DUMP_MESSAGE.format(name))
            return
        program = argv[0]
        if not _is_literal(program):
            if not from_pipeline:
                self.report(
                    _UNRESOLVABLE,
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
        self._program(name, program, args)

    def _strip_prefixes(self, words: list[Any]) -> list[Any]:
        """Drop ``env A=1``, ``sudo -u x``, ``timeout 5``, ``xargs -0``... before the program."""
        i = 0
        while i < len(words) and _is_literal(words[i]):
            base = os.path.basename(words[i].word)
            if base not in PREFIXES:
                break
            i += 1
            while i < len(words) and _is_literal(words[i]):
                word = words[i].word
                if (
                    word.startswith("-")
                    or re.fullmatch(r"[A-Za-z_]\w*=.*", word, re.DOTALL)
                    or (base == "timeout" and re.fullmatch(r"[0-9.]+[smhd]?", word))
                ):
                    i += 1
                else:
                    break
        return words[i:]

    def _interpreter(
        self, name: str, program: Any, args: list[Any], *, stdin_fed: bool, judge: bool
    ) -> None:
        """A shell or python: its program must be a literal file of the hook or literal
        inline code (audited in turn), never stdin or a process substitution."""
        operand: Any = None
        inline: Any = None
        for i, word in enumerate(args):
            value = word.word if _is_literal(word) else None
            if value is not None and value.startswith("-") and value != "-":
                if not value.startswith("--") and "c" in value[1:]:
                    inline = args[i + 1] if i + 1 < len(args) else word
                    break
                if name in PYTHONS and not value.startswith("--") and "m" in value[1:]:
                    return  # a module of the installed interpreter
                continue
            operand = word
            break
        if (inline is None and operand is None) or (
            operand is not None and _is_literal(operand) and operand.word == "-"
        ):
            if stdin_fed or judge:
                self.report(
                    "pipe-to-shell",
                    program.pos[0],
                    f"{name} reads the program it runs from its input (a pipe, a here-doc or "
                    "the event itself): put the code in a file of the hook and run that",
                )
            return
        if not judge:
            return
        if inline is not None:
            if not _is_literal(inline):
                self.report(
                    _UNRESOLVABLE,
                    inline.pos[0],
                    f"{name} -c runs a program built at run time: write it literally",
                )
            elif self.depth >= MAX_NESTING:
                self.report(_UNRESOLVABLE, inline.pos[0], "shells nested too deep to audit")
            elif name in SHELLS:
                offset = _line(self.text, inline.pos[0]) - 1 + self.line_offset
                _ShellAudit(inline.word, self.sink, self.depth + 1, offset).run()
            else:
                from hookbus.audit.python_rules import scan_python  # python_rules imports this

                where = _line(self.text, inline.pos[0]) + self.line_offset
                scan_python(inline.word, self._at(where), self.depth + 1)
            return
        self._local_code(name, operand)

    def _local_code(self, name: str, operand: Any) -> None:
        if not _is_literal(operand) or escapes_folder(operand.word):
            self.report(
                _UNRESOLVABLE,
                operand.pos[0],
                f"{name} runs {operand.word!r}, which is not a literal file of the hook "
                "folder: ship the script in the hook and run it by a relative path",
            )

    def _program(self, name: str, program: Any, args: list[Any]) -> None:
        pos = program.pos[0]
        if name in SH_EVALUATORS:
            self.report(
                _UNRESOLVABLE,
                pos,
                f"{name} runs text as shell code, which the audit cannot follow: write the "
                "commands themselves",
            )
            return
        if name in ("source", "."):
            if not args:
                return
            self._local_code(name, args[0])
            return
        if name in INLINE_INTERPRETERS and any(
            _is_literal(a) and a.word in INLINE_INTERPRETERS[name] for a in args
        ):
            self.report(
                _UNRESOLVABLE,
                pos,
                f"an inline {name} program cannot be audited: write the handler in sh or python",
            )
            return
        outside = "/" in program.word and escapes_folder(program.word)
        if outside and not is_system_program(program.word):
            self.report(
                _UNRESOLVABLE,
                pos,
                f"runs {program.word!r}, outside the hook folder: ship it in the hook",
            )
        if name in ("awk", "gawk", "mawk", "nawk") and any(
            "system" in a.word or "|" in a.word for a in args if _is_literal(a)
        ):
            self.report(_UNRESOLVABLE, pos, "an awk program that runs commands: remove it")
        if name in ("find",) and any(_is_literal(a) and a.word.startswith("-exec") for a in args):
            rest = [a for a in args if _is_literal(a)]
            names = {os.path.basename(a.word) for a in rest}
            if names & (SHELLS | PYTHONS | SH_EVALUATORS):
                self.report(_UNRESOLVABLE, pos, "find -exec runs a shell on what it finds")
        if name in ENV_DUMPERS and self._dumps_environment(name, args):
            self.report("credential-read", pos, _DUMP_MESSAGE.format(name))
        if name == "printenv":
            for a in args:
                if _is_literal(a) and SECRET_NAME.search(a.word):
                    self.report("credential-read", a.pos[0], f"printenv {a.word}: a secret")
        self._writes(name, args)

    @staticmethod
    def _dumps_environment(name: str, args: list[Any]) -> bool:
        plain = [a.word for a in args if _is_literal(a)]
        if name in ("env", "printenv"):
            return not [a for a in plain if not a.startswith("-")] and len(plain) == len(args)
        if name in ("set",):
            return not args
        if name in ("export", "declare", "typeset"):
            return not args or any(a in ("-p", "-x", "-px", "-xp") for a in plain)
        return name == "compgen" and any(a in ("-e", "-v") for a in plain)

    def _writes(self, name: str, args: list[Any]) -> None:
        targets: list[Any] = []
        if name in WRITERS:
            targets = [a for a in args if not (_is_literal(a) and a.word.startswith("-"))]
            if name in ("chmod", "chown", "chgrp") and targets:
                targets = targets[1:]
        elif name == "dd":
            targets = [a for a in args if a.word.startswith("of=")]
        elif name in ("sed", "perl") and any(
            _is_literal(a) and re.fullmatch(r"-[a-zA-Z]*i.*|--in-place.*", a.word) for a in args
        ):
            plain = [a for a in args if not (_is_literal(a) and a.word.startswith("-"))]
            targets = plain[1:]
        elif name in ("curl", "wget"):
            for i, a in enumerate(args):
                names_file = a.word in ("-o", "--output", "-O", "--output-document")
                remote_name = name == "curl" and a.word == "-O"
                if _is_literal(a) and names_file and not remote_name and i + 1 < len(args):
                    targets.append(args[i + 1])
        for target in targets:
            self._inside(target, f"{name} writes")

    def _inside(self, word: Any, what: str) -> None:
        raw = word.word
        value = raw.split("=", 1)[1] if raw.startswith("of=") else raw
        if _is_literal(word):
            if value in SAFE_DEVICES or (
                not escapes_folder(value) and not value.startswith(("$", "~"))
            ):
                return
        elif HOOK_DIR_VAR.match(value) and ".." not in value.split("/"):
            rest = HOOK_DIR_VAR.sub("", value)
            if "$" not in rest and "`" not in rest:
                return
        self.report(
            "write-outside-folder",
            word.pos[0],
            f"{what} {raw!r}, which is not a literal path inside the hook folder: write only "
            "inside it (relative paths, or under $HOOKBUS_HOOK_DIR)",
        )

    def _redirect(self, node: Any) -> None:
        target = getattr(node, "output", None)
        if target is None or not hasattr(target, "kind"):
            return  # 2>&1 and the like: a file descriptor
        if node.type in (">", ">>", ">|", "&>", "&>>", "<>", ">&"):
            self._inside(target, "redirects output to")
        elif node.type in ("<", "<&") and _is_literal(target):
            self._credential_text(target.word, target.pos[0])

    def _rescan(self, node: Any, words: list[Any]) -> None:
        """The command as bash will run it, through the text rules: quote removal and
        escapes no longer hide ``rm -rf /``."""
        if not words or not all(_is_literal(w) for w in words):
            return
        resolved = shlex.join(w.word for w in words)
        original = self.text[node.pos[0] : node.pos[1]]
        if resolved != original:
            scan_dangerous(resolved, self._at(_line(self.text, node.pos[0]) + self.line_offset))


def scan_shell(text: str, sink: Sink, depth: int = 0, line_offset: int = 0) -> None:
    """Parse ``text`` (a script or a command line) and report what an agent may not do."""
    _ShellAudit(text, sink, depth, line_offset).run()
