"""Programs that run other programs, or reach past the hook, as a table of small rules: what
the audit of agent-authored shell says about ``setpriv``, ``flock -c``, ``script -c``,
``git -c alias.x=!``, ``find -exec``, ``xargs``, ``sed``'s ``e``, ``tar``'s checkpoint
actions, ``mapfile -C``, ``declare -i``, unix sockets...

Each rule takes ``(report, name, program, args, nested)``; ``nested(words)`` audits words as
one command line of their own (the command ``find -exec`` runs, say). A program not in
:data:`PROGRAM_RULES` has no rule here (:mod:`hookbus.audit.shell.effects` still judges it).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from hookbus.audit.shell.effects import UNRESOLVABLE, Report, is_literal

Nested = Callable[[list[Any]], None]
ProgramRule = Callable[[Report, str, Any, list[Any], Nested], None]

#: Rule name for connections to the host's unix sockets.
HOST_SOCKET = "host-socket"


def _literal_words(args: list[Any]) -> list[str]:
    return [a.word for a in args if is_literal(a)]


def _privileged(report: Report, name: str, program: Any, args: list[Any], nested: Nested) -> None:
    report(
        UNRESOLVABLE,
        program.pos[0],
        f"{name} runs a command with other privileges, namespaces or in another context: a "
        "hook runs its commands directly",
    )


def _command_string(options: tuple[str, ...]) -> ProgramRule:
    """A program whose option takes a whole command line as one string (``flock -c``,
    ``script -c``, ``su -c``, ``env -S``): refused, the command is run directly instead."""

    def rule(report: Report, name: str, program: Any, args: list[Any], nested: Nested) -> None:
        for word in _literal_words(args):
            if word in options or any(word.startswith(o + "=") for o in options if "--" in o):
                report(
                    UNRESOLVABLE,
                    program.pos[0],
                    f"{name} {word} runs a command line given as one string: run the "
                    "command itself",
                )
                return
        if not all(is_literal(a) for a in args):
            report(UNRESOLVABLE, program.pos[0], f"{name} runs a command built at run time")

    return rule


def _git(report: Report, name: str, program: Any, args: list[Any], nested: Nested) -> None:
    words = _literal_words(args)
    if (
        "-c" in words
        or "--config-env" in words
        or any(w.startswith("--config-env=") for w in words)
    ):
        report(
            UNRESOLVABLE,
            program.pos[0],
            "git -c sets configuration for this run (aliases with '!', core.pager, "
            "core.sshCommand run commands): a hook uses git as configured",
        )


_TAR_RUNNERS = re.compile(
    r"--(?:checkpoint-action|to-command|use-compress-program|info-script|new-volume-script|"
    r"rsh-command)(?:=|$)|-I$|-F$"
)


def _tar(report: Report, name: str, program: Any, args: list[Any], nested: Nested) -> None:
    if any(_TAR_RUNNERS.match(w) for w in _literal_words(args)):
        report(UNRESOLVABLE, program.pos[0], "tar runs a command (a checkpoint action, a filter)")


def _rsync(report: Report, name: str, program: Any, args: list[Any], nested: Nested) -> None:
    if any(w in ("-e", "--rsh") or w.startswith("--rsh=") for w in _literal_words(args)):
        report(UNRESOLVABLE, program.pos[0], "rsync -e runs a command of its own")


#: ``s/a/b/e`` and the ``e`` command run the pattern space or a command through a shell.
_SED_EXEC = re.compile(r"s(.)(?:(?!\1).|\\.)*\1(?:(?!\1).|\\.)*\1[a-zA-Z0-9]*e|(?:^|[;\n{])\s*e\b")


def _sed(report: Report, name: str, program: Any, args: list[Any], nested: Nested) -> None:
    if any(_SED_EXEC.search(w) for w in _literal_words(args) if not w.startswith("-")):
        report(UNRESOLVABLE, program.pos[0], "sed's e runs a shell command: remove it")


def _mapfile(report: Report, name: str, program: Any, args: list[Any], nested: Nested) -> None:
    if "-C" in _literal_words(args):
        report(UNRESOLVABLE, program.pos[0], f"{name} -C runs a callback string as code")


def _xargs(report: Report, name: str, program: Any, args: list[Any], nested: Nested) -> None:
    words = _literal_words(args)
    if any(w.startswith(("-I", "-i", "--replace")) for w in words) or len(words) != len(args):
        report(
            UNRESOLVABLE,
            program.pos[0],
            "xargs builds the command it runs from its input: run the command directly",
        )
        return
    command = [a for a in args if not a.word.startswith("-")]
    if command:
        nested(command)


def _find(report: Report, name: str, program: Any, args: list[Any], nested: Nested) -> None:
    for i, word in enumerate(args):
        if is_literal(word) and word.word in ("-exec", "-execdir", "-ok", "-okdir"):
            command: list[Any] = []
            for later in args[i + 1 :]:
                if is_literal(later) and later.word in (";", "+", "\\;"):
                    break
                command.append(later)
            if command:
                nested(command)


def _declare(report: Report, name: str, program: Any, args: list[Any], nested: Nested) -> None:
    for word in _literal_words(args):
        if re.fullmatch(r"[-+][a-zA-Z]*i[a-zA-Z]*", word):
            report(
                UNRESOLVABLE,
                program.pos[0],
                f"{name} {word} makes variables evaluate their values as arithmetic, which "
                "runs $(...) hidden in an array index: use plain variables",
            )
            return


def _unix_socket(options: tuple[str, ...]) -> ProgramRule:
    def rule(report: Report, name: str, program: Any, args: list[Any], nested: Nested) -> None:
        words = _literal_words(args)
        if any(w in options or w.startswith(options) or "UNIX-" in w.upper() for w in words):
            report(
                HOST_SOCKET,
                program.pos[0],
                f"{name} connects to a unix socket (a database, a container engine): a hook "
                "reaches nothing on the host",
            )

    return rule


PROGRAM_RULES: dict[str, ProgramRule] = {
    **dict.fromkeys(
        (
            "setpriv",
            "unshare",
            "nsenter",
            "chroot",
            "capsh",
            "sudo",
            "doas",
            "pkexec",
            "runuser",
            "busybox",
            "toybox",
            "systemd-run",
            "at",
            "batch",
            "ssh",
            "gdb",
            "strace",
            "ltrace",
        ),
        _privileged,
    ),
    "flock": _command_string(("-c", "--command")),
    "script": _command_string(("-c", "--command")),
    "su": _command_string(("-c", "--command", "-s", "--shell")),
    "env": _command_string(("-S", "--split-string")),
    "git": _git,
    "tar": _tar,
    "rsync": _rsync,
    "sed": _sed,
    "gsed": _sed,
    "mapfile": _mapfile,
    "readarray": _mapfile,
    "xargs": _xargs,
    "parallel": _xargs,
    "find": _find,
    **dict.fromkeys(("declare", "typeset", "local", "readonly", "export"), _declare),
    "curl": _unix_socket(("--unix-socket", "--abstract-unix-socket")),
    "nc": _unix_socket(("-U", "--unixsock")),
    "ncat": _unix_socket(("-U", "--unixsock")),
    "netcat": _unix_socket(("-U",)),
    "socat": _unix_socket(("UNIX-", "ABSTRACT-")),
}


def judge(report: Report, name: str, program: Any, args: list[Any], nested: Nested) -> None:
    """Run the rule of ``name``, if it has one."""
    rule = PROGRAM_RULES.get(name)
    if rule is not None:
        rule(report, name, program, args, nested)
