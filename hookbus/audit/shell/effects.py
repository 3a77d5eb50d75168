"""What one parsed shell command does, for the audit of agent-authored shell: the rules on
a command's program and words (evaluators, sourcing, writes outside the hook folder,
credential paths and secret variables, environment dumps) and on its redirections.
:mod:`hookbus.audit.shell.parse` walks the parse tree and calls these; each reports through
``report(rule, position in the text, message)``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

from hookbus.audit.shell import bindings
from hookbus.audit.shell.commands import escapes_folder, is_system_program
from hookbus.audit.shell.vocab import (
    CREDENTIAL_PATHS,
    ENV_DUMPERS,
    HOOK_DIR_VAR,
    INLINE_INTERPRETERS,
    PYTHONS,
    SAFE_DEVICES,
    SECRET_NAME,
    SH_EVALUATORS,
    SHELLS,
    STARTUP_VARIABLE,
    WRITERS,
)

Report = Callable[[str, int, str], None]

UNRESOLVABLE = "shell-unresolvable"
DUMP_MESSAGE = (
    "{} prints the whole environment, secrets included: print only the variables the hook needs"
)


def is_literal(word: Any) -> bool:
    """A word with nothing to expand at run time (a ``~`` aside)."""
    return all(p.kind == "tilde" for p in getattr(word, "parts", []) or [])


def parameter(report: Report, node: Any) -> None:
    value = str(getattr(node, "value", ""))
    if re.search(r"@[PEAK]\Z", value):
        report(
            UNRESOLVABLE,
            node.pos[0],
            f"${{{value}}} expands the value again as a prompt or escapes (a $(...) inside "
            "runs): use the variable plainly",
        )
        return
    if value.startswith("!"):
        report(
            UNRESOLVABLE,
            node.pos[0],
            f"${{{value}}} names a variable by another variable's value: write the name",
        )
        return
    name = re.match(r"[#]?([A-Za-z_][A-Za-z0-9_]*)", value)
    if name and SECRET_NAME.search(name.group(1)):
        report(
            "credential-read",
            node.pos[0],
            f"reads ${name.group(1)}, which looks like a secret: a hook gets only the "
            "variables the operator allows; remove it",
        )


def startup_assignment(report: Report, text: str, pos: int) -> None:
    """``BASH_ENV=... bash``, ``LD_PRELOAD=... prog``: a variable that makes what runs next
    load code of its own."""
    name = text.split("=", 1)[0]
    if "=" in text and STARTUP_VARIABLE.match(name):
        report(
            UNRESOLVABLE,
            pos,
            f"sets {name}, which makes a shell, the loader or an interpreter run code of its "
            "own: remove it",
        )


def credential_text(report: Report, text: str, pos: int) -> None:
    found = CREDENTIAL_PATHS.search(text)
    if found:
        report(
            "credential-read",
            pos,
            f"touches {found.group(0)!r}, where credentials live: a hook must not read them",
        )


def local_code(report: Report, name: str, operand: Any) -> None:
    if not is_literal(operand) or escapes_folder(operand.word):
        report(
            UNRESOLVABLE,
            operand.pos[0],
            f"{name} runs {operand.word!r}, which is not a literal file of the hook "
            "folder: ship the script in the hook and run it by a relative path",
        )


def _evaluator(report: Report, name: str, program: Any, args: list[Any]) -> bool:
    report(
        UNRESOLVABLE,
        program.pos[0],
        f"{name} runs text as shell code, which the audit cannot follow: write the "
        "commands themselves",
    )
    return True


def _source(report: Report, name: str, program: Any, args: list[Any]) -> bool:
    if args:
        local_code(report, name, args[0])
    return True


def _inline_program(report: Report, name: str, program: Any, args: list[Any]) -> bool:
    if any(is_literal(a) and a.word in INLINE_INTERPRETERS[name] for a in args):
        report(
            UNRESOLVABLE,
            program.pos[0],
            f"an inline {name} program cannot be audited: write the handler in sh or python",
        )
        return True
    return False


def _awk(report: Report, name: str, program: Any, args: list[Any]) -> bool:
    if any("system" in a.word or "|" in a.word for a in args if is_literal(a)):
        report(UNRESOLVABLE, program.pos[0], "an awk program that runs commands: remove it")
    return False


def _find_shell(report: Report, name: str, program: Any, args: list[Any]) -> bool:
    if any(is_literal(a) and a.word.startswith("-exec") for a in args):
        names = {os.path.basename(a.word) for a in args if is_literal(a)}
        if names & (SHELLS | PYTHONS | SH_EVALUATORS):
            report(UNRESOLVABLE, program.pos[0], "find -exec runs a shell on what it finds")
    return False


def _printenv(report: Report, name: str, program: Any, args: list[Any]) -> bool:
    for a in args:
        if is_literal(a) and SECRET_NAME.search(a.word):
            report("credential-read", a.pos[0], f"printenv {a.word}: a secret")
    return False


#: Rules by program name, run in order before the general ones; a rule returning True has
#: said all there is to say about the command.
_PROGRAM_RULES: dict[str, tuple[Callable[[Report, str, Any, list[Any]], bool], ...]] = {
    **{name: (_evaluator,) for name in SH_EVALUATORS},
    "source": (_source,),
    ".": (_source,),
    **{name: (_inline_program,) for name in INLINE_INTERPRETERS},
    **{name: (_awk,) for name in ("awk", "gawk", "mawk", "nawk")},
    "find": (_find_shell,),
    "printenv": (_printenv,),
}


def program_effects(
    report: Report,
    name: str,
    program: Any,
    args: list[Any],
    scratch: frozenset[str] = frozenset(),
) -> None:
    """What one command does, judged by its program: evaluators, sourcing, inline
    interpreters, programs outside the hook, environment dumps, writes."""
    for rule in _PROGRAM_RULES.get(name, ()):
        if rule(report, name, program, args):
            return
    outside = "/" in program.word and escapes_folder(program.word)
    if outside and not is_system_program(program.word):
        report(
            UNRESOLVABLE,
            program.pos[0],
            f"runs {program.word!r}, outside the hook folder: ship it in the hook",
        )
    if name in ENV_DUMPERS and dumps_environment(name, args):
        report("credential-read", program.pos[0], DUMP_MESSAGE.format(name))
    writes(report, name, args, scratch)


def dumps_environment(name: str, args: list[Any]) -> bool:
    plain = [a.word for a in args if is_literal(a)]
    if name in ("env", "printenv"):
        return not [a for a in plain if not a.startswith("-")] and len(plain) == len(args)
    if name in ("set",):
        return not args
    if name in ("export", "declare", "typeset"):
        return not args or any(a in ("-p", "-x", "-px", "-xp") for a in plain)
    return name == "compgen" and any(a in ("-e", "-v") for a in plain)


def writes(
    report: Report, name: str, args: list[Any], scratch: frozenset[str] = frozenset()
) -> None:
    targets: list[Any] = []
    if name in WRITERS:
        targets = [a for a in args if not (is_literal(a) and a.word.startswith("-"))]
        if name in ("chmod", "chown", "chgrp") and targets:
            targets = targets[1:]
    elif name == "dd":
        targets = [a for a in args if a.word.startswith("of=")]
    elif name in ("sed", "perl") and any(
        is_literal(a) and re.fullmatch(r"-[a-zA-Z]*i.*|--in-place.*", a.word) for a in args
    ):
        plain = [a for a in args if not (is_literal(a) and a.word.startswith("-"))]
        targets = plain[1:]
    elif name in ("curl", "wget"):
        for i, a in enumerate(args):
            names_file = a.word in ("-o", "--output", "-O", "--output-document")
            remote_name = name == "curl" and a.word == "-O"
            if is_literal(a) and names_file and not remote_name and i + 1 < len(args):
                targets.append(args[i + 1])
    for target in targets:
        inside(report, target, f"{name} writes", scratch)


def inside(report: Report, word: Any, what: str, scratch: frozenset[str] = frozenset()) -> None:
    raw = word.word
    value = raw.split("=", 1)[1] if raw.startswith("of=") else raw
    if bindings.is_scratch(value, scratch):
        return  # the run's own temp folder
    if is_literal(word):
        if value in SAFE_DEVICES or (
            not escapes_folder(value) and not value.startswith(("$", "~"))
        ):
            return
    elif HOOK_DIR_VAR.match(value) and ".." not in value.split("/"):
        rest = HOOK_DIR_VAR.sub("", value)
        if "$" not in rest and "`" not in rest:
            return
    report(
        "write-outside-folder",
        word.pos[0],
        f"{what} {raw!r}, which is not a literal path inside the hook folder: write only "
        "inside it (relative paths, or under $HOOKBUS_HOOK_DIR), or into $TMPDIR",
    )


def redirect(report: Report, node: Any, scratch: frozenset[str] = frozenset()) -> None:
    target = getattr(node, "output", None)
    if target is None or not hasattr(target, "kind"):
        return  # 2>&1 and the like: a file descriptor
    if node.type in (">", ">>", ">|", "&>", "&>>", "<>", ">&"):
        inside(report, target, "redirects output to", scratch)
    elif node.type in ("<", "<&") and is_literal(target):
        credential_text(report, target.word, target.pos[0])
