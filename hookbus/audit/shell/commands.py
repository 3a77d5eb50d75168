"""Command lines as the audit sees them: shell-like tokens, simple commands, the program
each runs, and the rules about which programs and paths a command may name (inside the hook
folder, in ``autonomy.allowed_commands``).
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Iterator

from hookbus.audit.textscan import Sink

_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "(", ")", "|&", ";;", "\n"})


def tokens(text: str) -> list[str]:
    """Shell-like tokens of one line, with ``;``, ``|``, ``&&``... as their own tokens.

    Falls back to splitting on whitespace when the quoting is unbalanced, so a broken line is
    still checked rather than skipped."""
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>")
        lexer.whitespace_split = True
        lexer.commenters = ""
        return list(lexer)
    except ValueError:
        return re.findall(r"&&|\|\||[;|&()]|[^\s;|&()]+", text)


def segments(toks: list[str]) -> Iterator[list[str]]:
    """Split tokens into simple commands at ``;``, ``&&``, ``|``..."""
    current: list[str] = []
    for tok in toks:
        if tok in _SEPARATORS:
            if current:
                yield current
            current = []
        else:
            current.append(tok)
    if current:
        yield current


def program(segment: list[str]) -> tuple[str | None, list[str]]:
    """The program of a simple command (after ``VAR=x`` and ``env``/``sudo``/``exec``) and
    its arguments."""
    i = 0
    while i < len(segment):
        tok = segment[i]
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", tok, flags=re.DOTALL):
            i += 1
        elif tok in {"env", "sudo", "exec", "nohup", "command", "builtin", "time", "nice"}:
            i += 1
            while i < len(segment) and segment[i].startswith("-"):
                i += 1
        else:
            return tok, segment[i + 1 :]
    return None, []


_SYSTEM_BIN_DIRS = (
    "/bin/",
    "/usr/bin/",
    "/usr/local/bin/",
    "/sbin/",
    "/usr/sbin/",
    "/usr/local/sbin/",
    "/opt/homebrew/bin/",
)
_SCRIPT_SUFFIXES = (
    ".sh",
    ".bash",
    ".zsh",
    ".py",
    ".js",
    ".mjs",
    ".ts",
    ".rb",
    ".pl",
    ".php",
    ".ps1",
)


def command_tokens(command: str | list[str]) -> list[str]:
    if isinstance(command, list):
        return [str(c) for c in command]
    return tokens(command)


def is_system_program(prog: str) -> bool:
    venv_bin = os.path.join(sys.prefix, "bin") + os.sep
    return prog.startswith((*_SYSTEM_BIN_DIRS, venv_bin))


def escapes_folder(path: str) -> bool:
    """Is ``path`` absolute, home-relative or does it climb out with ``..``?"""
    if path.startswith(("/", "~", "$HOME", "${HOME}", "\\")) or re.match(r"^[A-Za-z]:[\\/]", path):
        return True
    return ".." in re.split(r"[/\\]", path)


_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "ash", "fish"})


def shell_payloads(command: str | list[str]) -> list[str]:
    """The script text a command hands to a shell with ``-c`` (``bash -c "a; b"``): checked
    as shell, since the quotes that hide its ``;`` from the outer command do not protect it."""
    out: list[str] = []
    for seg in segments(command_tokens(command)):
        prog, args = program(seg)
        if prog is None or os.path.basename(prog) not in _SHELLS:
            continue
        for i, arg in enumerate(args[:-1]):
            if arg.startswith("-") and not arg.startswith("--") and "c" in arg:
                out.append(args[i + 1])
                break
    return out


def scan_command_paths(command: str | list[str], sink: Sink) -> None:
    """``..`` anywhere in a command, and programs or scripts outside the hook folder."""
    toks = command_tokens(command)
    for seg in segments(toks):
        prog, args = program(seg)
        if prog is not None and escapes_folder(prog) and not is_system_program(prog):
            sink(
                "path-escape",
                "critical",
                None,
                f"the command runs {prog!r}, outside the hook folder: put the handler in the hook "
                "folder and call it by a relative path (the bundle carries only the folder)",
            )
        for arg in args:
            for piece in re.split(r"[=:,]", arg):
                if ".." in re.split(r"[/\\]", piece):
                    sink(
                        "path-escape",
                        "critical",
                        None,
                        f"the command refers to {arg!r}, which climbs out of the hook folder with "
                        "'..': "
                        "use paths inside the hook folder",
                    )
                    break
                if piece.endswith(_SCRIPT_SUFFIXES) and escapes_folder(piece):
                    sink(
                        "path-escape",
                        "critical",
                        None,
                        f"the command runs the script {piece!r} from outside the hook folder: "
                        "copy it "
                        "into the hook folder and refer to it by a relative path",
                    )
                    break


def scan_allowed_commands(
    command: str | list[str], allowed: tuple[str, ...], local_files: frozenset[str], sink: Sink
) -> None:
    """Every program a command runs must be in ``autonomy.allowed_commands`` (handler scripts
    inside the hook folder are allowed: their content is audited instead)."""
    allowed_names = {os.path.basename(a) for a in allowed} | set(allowed)
    for seg in segments(command_tokens(command)):
        prog, _ = program(seg)
        if prog is None:
            continue
        local = prog[2:] if prog.startswith("./") else prog
        if local in local_files:
            continue
        if prog in allowed_names or os.path.basename(prog) in allowed_names:
            continue
        sink(
            "command-not-allowed",
            "high",
            None,
            f"the command runs {prog!r}, which is not in autonomy.allowed_commands "
            f"({', '.join(allowed) or 'empty'}): use an allowed program or ask an operator to add "
            "it",
        )
