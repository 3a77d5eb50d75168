"""The audit's text rules: pure functions over a command line or a handler script.

Each rule reports through a ``Sink`` (``sink(rule, severity, line, message)``, ``line``
1-based within the text given, or ``None``). The rules are pattern matches: they catch the
usual shapes of dangerous shell (what seed 000's skills audit blocks and what reverse-shell
cheat sheets list), not every way to write it, so they are one layer of defence next to the
scrubbed environment, the confined workdir and human review of ``hookbus hooks audit``.

Every regular expression has bounded gaps (``{0,256}``) and long lines are scanned in
overlapping windows, so a hostile file cannot make the audit take quadratic time.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shlex
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

Sink = Callable[[str, str, int | None, str], None]

#: Lines longer than this are scanned in overlapping windows of this many characters.
WINDOW_CHARS = 2048
#: Overlap of two windows, in characters (longer than any single pattern's match).
WINDOW_OVERLAP_CHARS = 512
#: At most this many findings of one rule per file; the rest are summed up in one finding.
MAX_FINDINGS_PER_RULE = 5

_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "(", ")", "|&", ";;", "\n"})

# --- dangerous shell ------------------------------------------------------------------

_G = r"[^\n]{0,256}?"  # a bounded gap on one line
_SH = r"(?:ba|da|z|k|c|tc|fi|a)?sh"
_INTERP = (
    rf"(?:sudo\s+(?:-\S+\s+){{0,4}})?(?:/usr)?(?:/local)?(?:/bin/)?"
    rf"(?:{_SH}|python[0-9.]*|perl|ruby|node|php|pwsh|powershell)\b"
)
_DOWNLOAD = (
    r"(?:\b(?:curl|wget|fetch|aria2c|lwp-download|lwp-request|iwr|invoke-webrequest)\b|"
    r"(?<![\w/.:-])https?(?=\s))"  # httpie's `http`/`https` commands, not a URL's scheme
)
#: After an interpreter fed by a pipe: it runs its stdin as code when nothing follows, or a
#: flag other than ``-m``/``-c`` (``sh -s``, ``python3 -``); ``python3 -m json.tool`` or
#: ``bash script.sh`` only read the data.
_RUNS_STDIN = r"(?=\s*(?:$|[;&|)`\"'<#]|-(?![mc]\b)))"

_FORK_BOMB = (
    re.compile(r"([\w:.]{1,64})\s*\(\s*\)\s*\{[^}\n]{0,64}?\1\s*\|\s*\1\s*&"),
    re.compile(r"\bfork\s+while\s+fork\b"),
    re.compile(
        r"\bwhile\s*(?:\(\s*)?(?:true|1|True|:)\s*(?:\)\s*)?[:;]?\s*(?:do)?\s*"
        + _G
        + r"\bfork\s*\("
    ),
    re.compile(r"\bfor\s*\(\s*;\s*;\s*\)\s*(?:\{\s*)?fork\s*\("),
)
_FORK_BOMB_MULTILINE = re.compile(r"while\s+(?:True|1)\s*:\s*\n\s{0,32}os\.fork\s*\(")

_DOWNLOAD_TO_SHELL = (
    re.compile(rf"{_DOWNLOAD}{_G}\|\s*{_INTERP}{_RUNS_STDIN}", re.IGNORECASE),
    re.compile(
        rf"(?:\b(?:{_SH}|source|eval|exec)\b|(?:^|[;&|]\s*)\.)\s+(?:-c\s+)?[\"']?(?:<\(|\$\(|`)\s*"
        rf"(?:sudo\s+)?{_DOWNLOAD}",
        re.IGNORECASE,
    ),
    re.compile(
        r"\b(?:iex|invoke-expression)\b" + _G + r"(?:downloadstring|iwr|invoke-webrequest)", re.I
    ),
)

_REVERSE_SHELL = (
    re.compile(r"/dev/(?:tcp|udp)/"),
    re.compile(r"\b(?:nc|ncat|netcat|nc\.traditional|nc\.openbsd)\b" + _G + r"\s-[a-zA-Z]*[ec]\b"),
    re.compile(r"\bncat\b" + _G + r"--(?:exec|sh-exec|lua-exec)\b"),
    re.compile(rf"\b{_SH}\s+-i\b{_G}[<>]&"),
    re.compile(rf"\bmkfifo\b{_G}(?:\b(?:nc|ncat|netcat|telnet|openssl|socat)\b|\b{_SH}\s+-i\b)"),
    re.compile(r"\b(?:nc|ncat|netcat|telnet)\b" + _G + r"\bmkfifo\b"),
    re.compile(r"\bsocat\b" + _G + r"\b(?:exec|system):", re.IGNORECASE),
    re.compile(r"\bdup2\s*\([^)\n]{0,128}fileno\s*\(\s*\)"),
    re.compile(r"\bpty\.spawn\s*\(\s*[\"'](?:/bin/)?(?:ba)?sh"),
    re.compile(r"\btelnet\b" + _G + r"\|\s*/bin/(?:ba)?sh"),
)

_DECODED_EXEC = (
    re.compile(
        r"\b(?:base64|b64decode|base32|xxd\s+-r|uudecode|openssl\s+(?:enc\s+)?-?(?:base64|d))\b"
        + _G
        + rf"\|\s*(?:{_INTERP}{_RUNS_STDIN}|eval\b|source\b|exec\b)",
        re.IGNORECASE,
    ),
    re.compile(r"\beval\b" + _G + r"\$\(" + _G + r"(?:base64|xxd\s+-r|b64decode|openssl)", re.I),
    re.compile(rf"\b{_SH}\s+-c\s+[\"']?\$\({_G}(?:base64|xxd\s+-r|b64decode|openssl)", re.I),
    re.compile(
        r"\b(?:exec|eval)\s*\(\s*(?:compile\s*\(\s*)?(?:[\w.]*b64decode|[\w.]*b32decode|"
        r"[\w.]*decodebytes|[\w.]*decompress|codecs\.decode|bytes\.fromhex|bytearray\.fromhex|"
        r"[\w.]*urlopen|requests\.(?:get|post)|httpx\.(?:get|post)|urllib\b|"
        r"__import__\s*\(\s*[\"'](?:base64|zlib|codecs|urllib|requests))"
    ),
    re.compile(r"\b(?:eval|Function)\s*\(\s*(?:atob|Buffer\.from|unescape)\s*\("),
    re.compile(r"\beval\b\s+[\"']?\$\(\s*(?:curl|wget)\b", re.IGNORECASE),
    re.compile(r"\|\s*eval\b"),
)

_DEVICE_WRITE = (
    re.compile(r"\bdd\b" + _G + r"\bof=/dev/(?!null\b|zero\b|stdout\b|stderr\b|fd/|tty\b)"),
    re.compile(
        r">\s*/dev/(?:sd[a-z]|hd[a-z]|nvme\d|vd[a-z]|xvd[a-z]|mmcblk\d|disk\d|mapper/|md\d|dm-\d|loop\d)"
    ),
    re.compile(r"\bmkfs(?:\.\w+)?\b" + _G + r"/dev/"),
    re.compile(r"\b(?:shred|wipefs|blkdiscard)\b" + _G + r"/dev/"),
)

_STARTUP = (
    r"(?:\.bashrc|\.bash_profile|\.bash_login|\.bash_logout|\.profile|\.zshrc|\.zprofile|"
    r"\.zshenv|\.zlogin|\.kshrc|\.cshrc|\.tcshrc|config\.fish|/etc/profile(?:\.d)?|"
    r"/etc/bash\.bashrc|/etc/environment|/etc/zsh/\w+|\.ssh/authorized_keys|\.ssh/rc|"
    r"/etc/rc\.local|/etc/cron\.\w+|/etc/crontab)\b"
)
_STARTUP_WRITE = (
    re.compile(r">>?\s*[\"']?[^\s;|&<>\"']{0,256}?" + _STARTUP),
    re.compile(r"\btee\b(?:\s+-\S+){0,4}\s+[\"']?[^\s;|&\"']{0,256}?" + _STARTUP),
    re.compile(
        r"\b(?:cp|mv|ln|install|rsync)\b[^\n;|&]{0,256}?\s[\"']?[^\s;|&\"']{0,256}?"
        + _STARTUP
        + r"[\"']?\s*(?:$|[;|&)])"
    ),
    re.compile(r"\b(?:sed|perl)\s+(?:-\S+\s+){0,4}?-[a-zA-Z]*i" + _G + _STARTUP),
    re.compile(r"\bopen\s*\([^\n]{0,256}?" + _STARTUP + r"[^\n]{0,256}?,\s*[\"'][wax]"),
    re.compile(_STARTUP + _G + r"\.(?:write_text|write_bytes)\s*\("),
    re.compile(r"\b(?:appendFile|writeFile)(?:Sync)?\s*\([^)\n]{0,256}?" + _STARTUP),
    re.compile(r"\bcrontab\s+(?!-l\b)\S"),
)

_WRITE_OP = re.compile(
    r"(?:>>?(?!&)|\b(?:tee|cp|mv|ln|install|rsync|touch|mkdir|rm|rmdir|unlink|chmod|chown|truncate)\b|"
    r"\b(?:sed|perl)\s+(?:-\S+\s+){0,4}?-[a-zA-Z]*i\b|\bopen\s*\([^\n]{0,256}?,\s*[\"'][wax+]|"
    r"\.(?:write_text|write_bytes|unlink|rename|replace|rmdir|mkdir|touch)\s*\(|"
    r"\b(?:shutil\.(?:copy\w*|move|rmtree)|os\.(?:rename|replace|remove|unlink|makedirs|mkdir|symlink|link))\s*\(|"
    r"\b(?:appendFile|writeFile|copyFile|rename|unlink|rmSync|mkdirSync)(?:Sync)?\s*\()"
)
_HOOKBUS_SELF_EDIT = re.compile(
    r"\bhookbus\b" + _G + r"\bhooks\s+(?:write|create|enable|disable)\b"
)
_HOOK_MANIFEST_NAMES = re.compile(
    r"\bHOOK\.(?:toml|md)\b|\bHOOKBUS_HOOKS_DIR\b|\bHOOKBUS_HOOK_DIR\}?/\.\.|(?:^|[\s\"'=(])\.\./"
    # the parent of a hook's folder is the hooks folder: Python / JS ways to name it
    r"|[\"']\.\.[\"']|\.parent\.parent\b|\.parents\[\s*[1-9]|dirname\(\s*(?:os\.path\.)?dirname\("
)
#: A handler that changes into the hooks folder (or further up) leaves its own folder.
_CD_UP = re.compile(
    r"(?:^|[;&|(]\s*|\s)cd\s+[\"']?(?:\.\.(?:/|[\"'\s;&|)]|$)|/(?:[\"'\s;&|)]|$)|~/?(?:[\"'\s;&|)]|$))"
    r"|\b(?:os\.)?chdir\s*\(\s*[\"']\.\.[/\"']"
)

_RMTREE_ROOT = re.compile(
    r"\brmtree\s*\(\s*(?:[\"'](?:/|~|/\*|~/)[\"']|os\.path\.expanduser\(\s*[\"']~/?[\"']\s*\)|"
    r"Path\.home\(\)|os\.environ\[\s*[\"']HOME[\"']\s*\]|[\"']/[\"'])\s*[,)]"
)
_DANGEROUS_RM_TARGETS = frozenset(
    {
        "/",
        "/*",
        "/.",
        "~",
        "~/",
        "~/*",
        "*",
        ".*",
        "$HOME",
        "${HOME}",
        "$HOME/",
        "${HOME}/",
        "$HOME/*",
        "${HOME}/*",
        "/home",
        "/home/*",
        "/usr",
        "/etc",
        "/var",
        "/boot",
        "/bin",
        "/lib",
    }
)
_CHMOD_WIDE = frozenset({"777", "0777", "a+rwx", "ugo+rwx", "o+rwx", "a+w", "o+w", "666", "0666"})
_CHMOD_ROOTS = frozenset({"/", "/*", "~", "~/", "~/*", "$HOME", "${HOME}", "/etc", "/usr", "/home"})


# Cheap prefilters: a line without any of these words cannot match the group's patterns.
_DOWNLOAD_WORDS = (
    "curl",
    "wget",
    "fetch",
    "aria2c",
    "lwp-",
    "http",
    "iwr",
    "invoke-web",
    "downloadstring",
)
_REVERSE_WORDS = ("/dev/tcp", "/dev/udp", "nc", "mkfifo", "socat", "dup2", "pty", "telnet", "-i")
_DECODE_WORDS = (
    "base64",
    "b64",
    "base32",
    "xxd",
    "uudecode",
    "openssl",
    "eval",
    "exec",
    "function",
)
_STARTUP_WORDS = (
    "rc",
    "profile",
    "authorized_keys",
    "cron",
    "zshenv",
    "zlogin",
    "environment",
    "fish",
    "bash_log",
)
_RM_CHMOD_WORDS = re.compile(r"\b(?:rm|chmod|find|rmtree)\b")


def _has_any(lower: str, words: tuple[str, ...]) -> bool:
    return any(w in lower for w in words)


def windows(line: str) -> Iterator[str]:
    """The line itself, or overlapping windows of a long line."""
    if len(line) <= WINDOW_CHARS:
        yield line
        return
    step = WINDOW_CHARS - WINDOW_OVERLAP_CHARS
    for start in range(0, len(line), step):
        yield line[start : start + WINDOW_CHARS]
        if start + WINDOW_CHARS >= len(line):
            break


def _search(patterns: Iterable[re.Pattern[str]], line: str) -> bool:
    return any(p.search(w) for w in windows(line) for p in patterns)


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


def _segments(toks: list[str]) -> Iterator[list[str]]:
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


def _program(segment: list[str]) -> tuple[str | None, list[str]]:
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


def _rm_dangerous(segment: list[str]) -> bool:
    prog, args = _program(segment)
    if prog is None:
        return False
    base = os.path.basename(prog)
    if base == "rm":
        flags = [a for a in args if a.startswith("-") and a != "-"]
        recursive = any(
            a == "--recursive" or (not a.startswith("--") and "r" in a.lower()) for a in flags
        )
        targets = [a for a in args if not a.startswith("-")]
        return recursive and any(t in _DANGEROUS_RM_TARGETS for t in targets)
    if base == "find":
        targets = [a for a in args if not a.startswith("-")][:1]
        deletes = "-delete" in args or ("-exec" in args and "rm" in args)
        return deletes and any(t in _DANGEROUS_RM_TARGETS for t in targets)
    return False


def _chmod_dangerous(segment: list[str]) -> bool:
    prog, args = _program(segment)
    if prog is None or os.path.basename(prog) != "chmod":
        return False
    plain = [a for a in args if not a.startswith("-")]
    return bool(plain) and plain[0] in _CHMOD_WIDE and any(t in _CHMOD_ROOTS for t in plain[1:])


def scan_dangerous(text: str, sink: Sink, *, hooks_refs: tuple[str, ...] = ()) -> None:
    """Dangerous shell in ``text`` (a command or a script; comment lines skipped)."""
    hooks_pattern = _hooks_ref_pattern(hooks_refs)
    for lineno, line in enumerate(text.splitlines() or [text], start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "//")):
            continue
        lower = line.lower()
        if "fork" in lower or ("(" in line and "|" in line and "&" in line):
            fork_bomb = _search(_FORK_BOMB, line)
        else:
            fork_bomb = False
        if fork_bomb:
            sink(
                "fork-bomb",
                "critical",
                lineno,
                "a fork bomb: remove it; a hook must never spawn processes without bound",
            )
        if _has_any(lower, _DOWNLOAD_WORDS) and _search(_DOWNLOAD_TO_SHELL, line):
            sink(
                "download-to-shell",
                "critical",
                lineno,
                "downloaded content is run by a shell or interpreter: ship the script inside the "
                "hook folder instead, where the audit and the bundle can see it",
            )
        if _has_any(lower, _REVERSE_WORDS) and _search(_REVERSE_SHELL, line):
            sink(
                "reverse-shell",
                "critical",
                lineno,
                "a reverse-shell pattern (/dev/tcp, nc -e, bash -i >&, mkfifo pipes, socat "
                "exec): remove it",
            )
        if _has_any(lower, _DECODE_WORDS) and _search(_DECODED_EXEC, line):
            sink(
                "decoded-exec",
                "critical",
                lineno,
                "decoded or fetched content is executed (base64 | sh, eval $(...), "
                "exec(b64decode(...))): "
                "write the code in plain text in the hook folder",
            )
        if ("/dev/" in line or "mkfs" in line) and _search(_DEVICE_WRITE, line):
            sink(
                "device-write",
                "critical",
                lineno,
                "writes to a block device (dd of=/dev/..., mkfs): remove it",
            )
        if _has_any(lower, _STARTUP_WORDS) and _search(_STARTUP_WRITE, line):
            sink(
                "startup-file-write",
                "critical",
                lineno,
                "writes to a shell start-up or persistence file (~/.bashrc, ~/.profile, "
                "authorized_keys, "
                "crontab): a hook must not change what runs at login",
            )
        if ("cd" in line or "chdir" in line) and _CD_UP.search(line):
            sink(
                "path-escape",
                "high",
                lineno,
                "the handler changes directory out of its hook folder (cd .., cd /, cd ~): "
                "work inside the hook folder (it is the working directory)",
            )
        if hooks_pattern is not None and _writes_hooks(line, hooks_pattern):
            sink(
                "hooks-dir-write",
                "critical",
                lineno,
                "writes into the hooks folder (a hook must not rewrite hooks): keep its files in "
                "its own "
                "folder and let a person or `hookbus hooks write` change hooks",
            )
        if len(line) <= WINDOW_CHARS * 4 and _RM_CHMOD_WORDS.search(line):
            toks = tokens(line)
            segs = list(_segments(toks))
            if any(_rm_dangerous(s) for s in segs) or _RMTREE_ROOT.search(line):
                sink(
                    "rm-rf",
                    "critical",
                    lineno,
                    "recursive delete of /, ~ or *: remove it or name the exact path to delete",
                )
            if any(_chmod_dangerous(s) for s in segs):
                sink("chmod-777", "critical", lineno, "chmod 777 (or a+w) on / or ~: remove it")
    if _FORK_BOMB_MULTILINE.search(text[: 1024 * 1024]):
        sink("fork-bomb", "critical", None, "os.fork() in an endless loop: remove it")


def _hooks_ref_pattern(refs: tuple[str, ...]) -> re.Pattern[str] | None:
    parts = [re.escape(r.rstrip("/")) + r"(?:/|\b|$)" for r in refs if r and r.rstrip("/")]
    parts.append(_HOOK_MANIFEST_NAMES.pattern)
    try:
        return re.compile("|".join(parts))
    except re.error:  # pragma: no cover - escaped input cannot fail
        return _HOOK_MANIFEST_NAMES


def _writes_hooks(line: str, hooks_pattern: re.Pattern[str]) -> bool:
    if _HOOKBUS_SELF_EDIT.search(line):
        return True
    return any(hooks_pattern.search(w) and _WRITE_OP.search(w) for w in windows(line))


# --- chaining -------------------------------------------------------------------------


_STRUCTURAL_SEMICOLON = re.compile(r";;|;\s*(?:then|do|else|fi|done|esac)\b")
_SHELL_SPECIAL = re.compile(r"[\\'\";|&`$#\n]")


def chaining_ops(line: str) -> list[str]:
    """The chaining operators of one shell line outside single quotes: ``;``, ``&&``, ``||``,
    ``|``, backticks, ``$(`` (the last two also inside double quotes, where they expand).

    Walks only the characters that matter (quotes, escapes, operators), found by a regex."""
    if not _SHELL_SPECIAL.search(line):
        return []
    ops: list[str] = []
    quote: str | None = None
    skip_until = -1
    for m in _SHELL_SPECIAL.finditer(line):
        i = m.start()
        if i < skip_until:
            continue
        c = line[i]
        if quote == "'":
            if c == "'":
                quote = None
        elif c == "\\":
            skip_until = i + 2
        elif quote == '"':
            if c == '"':
                quote = None
            elif c == "`":
                ops.append("`")
            elif line.startswith("$(", i):
                ops.append("$(")
        elif c in "'\"":
            quote = c
        elif c == "#":
            if i == 0 or line[i - 1].isspace():
                break
        elif line.startswith(("&&", "||"), i):
            ops.append(line[i : i + 2])
            skip_until = i + 2
        elif c == ";":
            structural = _STRUCTURAL_SEMICOLON.match(line, i)
            if structural:  # `if x; then`, `for ...; do`, `;;` in a case: syntax, not chaining
                skip_until = structural.end()
            else:
                ops.append(c)
        elif c in "|`":
            ops.append(c)
        elif c == "\n":
            ops.append("newline")
        elif line.startswith("$(", i):
            ops.append("$(")
    return ops


def scan_chaining(text: str, sink: Sink, *, severity: str, what: str) -> None:
    """Report shell chaining in ``text`` (one finding per line)."""
    lines = text.splitlines() or [text]
    if what == "command" and len(lines) > 1:
        sink(
            "shell-chaining",
            severity,
            None,
            "the command spans several lines (each line is another command): put the steps in a "
            "handler script, or set autonomy.allow_shell_chaining = true",
        )
    for lineno, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        ops = sorted(set(chaining_ops(line)))
        if ops:
            sink(
                "shell-chaining",
                severity,
                lineno,
                f"shell chaining ({' '.join(ops)}) in the {what} while "
                "autonomy.allow_shell_chaining "
                "is false: "
                + (
                    "run one program and move the steps into a handler script"
                    if what == "command"
                    else "review each step (or set autonomy.allow_shell_chaining = true)"
                ),
            )


# --- allowed commands, forbidden paths, escaping paths ---------------------------------

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
    for seg in _segments(command_tokens(command)):
        prog, args = _program(seg)
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
    for seg in _segments(toks):
        prog, args = _program(seg)
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
    for seg in _segments(command_tokens(command)):
        prog, _ = _program(seg)
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


def forbidden_variants(path: str) -> list[str]:
    """The spellings of one forbidden path: as given, ``~`` expanded, ``$HOME`` forms."""
    out = [path]
    if path.startswith("~/") or path == "~":
        rest = path[2:]
        home = str(Path.home())
        out += [f"$HOME/{rest}", f"${{HOME}}/{rest}", os.path.join(home, rest) if rest else home]
    return [p.rstrip("/") or "/" for p in out if p]


def forbidden_pattern(paths: tuple[str, ...]) -> re.Pattern[str] | None:
    variants = {v for p in paths for v in forbidden_variants(p) if v not in {"/", ""}}
    if not variants:
        return None
    alts = "|".join(re.escape(v) for v in sorted(variants, key=len, reverse=True))
    return re.compile(rf"(?<![\w.\-/])(?:{alts})(?![\w.\-])")


def scan_forbidden_paths(
    text: str, pattern: re.Pattern[str] | None, sink: Sink, *, what: str
) -> None:
    if pattern is None:
        return
    for lineno, line in enumerate(text.splitlines() or [text], start=1):
        if line.strip().startswith("#"):
            continue
        for w in windows(line):
            m = pattern.search(w)
            if m:
                sink(
                    "forbidden-path",
                    "high",
                    lineno,
                    f"the {what} touches {m.group(0)!r}, under autonomy.forbidden_paths: "
                    "remove it or ask an operator to change the policy",
                )
                break


# --- http -----------------------------------------------------------------------------

_METADATA_HOSTS = frozenset(
    {
        "metadata.google.internal",
        "metadata",
        "instance-data",
        "metadata.azure.com",
        "instance-data.ec2.internal",
    }
)
_METADATA_IPS = frozenset({"169.254.169.254", "fd00:ec2::254", "100.100.100.200", "169.254.170.2"})


def _host_allowed(host: str, allowlist: tuple[str, ...]) -> bool:
    host = host.lower().rstrip(".")
    for entry in allowlist:
        e = entry.lower().strip()
        if "://" in e:
            e = urlsplit(e).hostname or ""
        e = e.split(":")[0] if e.count(":") == 1 else e
        if e.startswith("*."):
            if host.endswith(e[1:]) or host == e[2:]:
                return True
        elif host == e:
            return True
    return False


def scan_url(
    url: str, sink: Sink, *, allowlist: tuple[str, ...], allow_private: bool, line: int | None
) -> None:
    """An http action's URL: scheme, metadata / link-local / private hosts, the allowlist."""
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname or ""
    except ValueError:
        sink(
            "http-scheme",
            "high",
            line,
            f"the URL {url!r} does not parse: write a plain https:// URL",
        )
        return
    scheme = parts.scheme.lower()
    if "${" in url and not host:
        return  # the whole URL comes from an allow-listed environment variable
    if scheme not in {"http", "https"}:
        sink(
            "http-scheme",
            "critical",
            line,
            f"the URL {url!r} uses the {scheme or 'missing'} scheme: only http:// and https:// are "
            "allowed (file:// would read local files)",
        )
        return
    if not host:
        sink("http-scheme", "high", line, f"the URL {url!r} has no host: write a full https:// URL")
        return
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        ip = None
    if ip is not None and getattr(ip, "ipv4_mapped", None) is not None:
        ip = ip.ipv4_mapped  # type: ignore[union-attr]
    lowered = host.lower().rstrip(".")
    if lowered in _METADATA_HOSTS or (
        ip is not None and (str(ip) in _METADATA_IPS or ip.is_link_local)
    ):
        sink(
            "http-metadata",
            "critical",
            line,
            f"the URL {url!r} targets a cloud metadata or link-local address: a hook must never "
            "reach instance credentials; remove it",
        )
        return
    private = (
        lowered in {"localhost", "localhost.localdomain"}
        or lowered.endswith(".localhost")
        or (
            ip is not None
            and (ip.is_loopback or ip.is_private or ip.is_unspecified or ip.is_reserved)
        )
    )
    if private and not allow_private:
        sink(
            "http-private",
            "high",
            line,
            f"the URL {url!r} targets a loopback or private address: set "
            "security.allow_private_http = true if this local service is intended",
        )
    if allowlist and not _host_allowed(lowered, allowlist):
        sink(
            "http-not-allowlisted",
            "high",
            line,
            f"the host {host!r} is not in security.http_allowlist ({', '.join(allowlist)}): "
            "use an allowed host or ask an operator to add it",
        )


# --- secrets --------------------------------------------------------------------------

_SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("a private key", re.compile(r"-----BEGIN (?:[A-Z0-9]+ ){0,4}PRIVATE KEY-----"), "critical"),
    ("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), "high"),
    (
        "a GitHub token",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"),
        "high",
    ),
    ("a Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), "high"),
    ("an API key", re.compile(r"\bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_-]{20,}"), "high"),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}"), "high"),
    ("a Stripe key", re.compile(r"\b[rs]k_(?:live|test)_[0-9A-Za-z]{16,}"), "high"),
    (
        "a JSON web token",
        re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
        "high",
    ),
    ("a bearer token", re.compile(r"\b[Bb]earer\s+(?![$%{<])[A-Za-z0-9._~+/-]{16,}=*"), "high"),
    (
        "a password in a URL",
        re.compile(r"\b[a-z][a-z0-9+.-]{0,16}://[^/\s:@'\"]{1,128}:(?![$%{])[^/\s@'\"]{1,128}@"),
        "high",
    ),
    (
        "a password or token",
        re.compile(
            r"(?i)(?<![\w])[\w-]{0,64}(?:password|passwd|secret|api[_-]?key|access[_-]?key|"
            r"private[_-]?key|auth[_-]?token|access[_-]?token|token)\b[\"']?\s*[=:]\s*[\"']?"
            r"(?![$%{<])(?![0-9.]+\b)[^\s\"'$,}]{6,}"
        ),
        "high",
    ),
)

_CREDENTIAL_NAME = re.compile(
    r"(?i)(pass(word|wd)?|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|credential|auth|cookie|session[_-]?id)"
)
_REFERENCE = re.compile(
    r"^\s*(?:\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|%\([A-Za-z_]+\)s|\{\{[^}]*\}\})\s*$"
)


def scan_secrets(text: str, sink: Sink) -> None:
    """Tokens, private keys and passwords written into a manifest."""
    for lineno, line in enumerate(text.splitlines(), start=1):
        for w in windows(line):
            hit = next(
                ((label, sev) for label, pat, sev in _SECRET_PATTERNS if pat.search(w)), None
            )
            if hit is not None:
                label, sev = hit
                sink(
                    "secret-in-manifest",
                    sev,
                    lineno,
                    f"{label} is written into the manifest (it would travel in every bundle): "
                    "move it to an environment variable listed in security.env_allowlist and "
                    "refer to it as ${NAME}",
                )
                break


def looks_like_credential(name: str, value: str) -> str | None:
    """Why an env/header value looks like a credential, or ``None``."""
    if not isinstance(value, str) or not value.strip() or _REFERENCE.match(value):
        return None
    if "${" in value or value.startswith("$"):
        return None
    for label, pat, _sev in _SECRET_PATTERNS:
        if pat.search(value[:WINDOW_CHARS]):
            return label
    if _CREDENTIAL_NAME.search(name) and len(value) >= 6 and not value.isdigit():
        return f"a literal value for {name!r}"
    return None


# --- hidden text and slow patterns ------------------------------------------------------

#: Bidirectional controls and zero-width characters: they make code read differently from
#: what runs ("Trojan Source", CVE-2021-42574).
_HIDDEN_CHARS = re.compile("[\u202a-\u202e\u2066-\u2069\u200b-\u200f\u2060\ufeff]")


def scan_hidden_text(text: str, sink: Sink) -> None:
    """Invisible or direction-changing characters, which hide code from a reviewer."""
    for lineno, line in enumerate(text.splitlines(), start=1):
        found = _HIDDEN_CHARS.search(line)
        if found is not None and not (
            lineno == 1 and found.start() == 0 and found.group() == "\ufeff"
        ):
            sink(
                "hidden-text",
                "high",
                lineno,
                f"an invisible or bidirectional control character (U+{ord(found.group()):04X}) "
                "that makes the text read differently from what runs: remove it",
            )


#: A group that repeats something repeated, repeated again: ``(a+)+``, ``(\w*)*``, ``(a|a)*``.
_NESTED_QUANTIFIER = re.compile(r"\((?:[^()\\]|\\.){0,200}[+*](?:\?)?\)(?:[+*]|\{\d*,\d*\})")


def scan_regex(pattern: str, sink: Sink, *, line: int | None) -> None:
    """A ``match.pattern`` runs on every event on the critical path: catastrophic
    backtracking there stalls the chain, so nested quantifiers are flagged."""
    if _NESTED_QUANTIFIER.search(pattern[:WINDOW_CHARS]):
        sink(
            "regex-backtracking",
            "high",
            line,
            f"match.pattern {pattern[:80]!r} nests quantifiers (like (a+)+), which can take "
            "exponential time on some input and stall every request: rewrite it without the "
            "repeated group",
        )
