"""The regular expressions and prefilter words of the audit's pattern rules for scripts and
command lines, as data; the table that names each rule, its severity and its message is
:mod:`hookbus.audit.pattern_table`.

The patterns catch the usual shapes of dangerous shell (downloads piped into a shell,
reverse shells, wiped disks, edited shell start-up files, what reverse-shell cheat sheets
list) and their Python spellings. They are one layer:
for agent-authored hooks :mod:`hookbus.audit.shell.parse` and :mod:`hookbus.audit.python.rules`
parse the text and refuse what they cannot resolve. Every expression has bounded gaps
(``{0,256}``), and :mod:`hookbus.audit.textscan` scans long lines in overlapping windows, so a
hostile file cannot make the audit take quadratic time.
"""

from __future__ import annotations

import re

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

FORK_BOMB = (
    re.compile(r"([\w:.]{1,64})\s*\(\s*\)\s*\{[^}\n]{0,64}?\1\s*\|\s*\1\s*&"),
    re.compile(r"\bfork\s+while\s+fork\b"),
    re.compile(
        r"\bwhile\s*(?:\(\s*)?(?:true|1|True|:)\s*(?:\)\s*)?[:;]?\s*(?:do)?\s*"
        + _G
        + r"\bfork\s*\("
    ),
    re.compile(r"\bfor\s*\(\s*;\s*;\s*\)\s*(?:\{\s*)?fork\s*\("),
)
FORK_BOMB_MULTILINE = re.compile(r"while\s+(?:True|1)\s*:\s*\n\s{0,32}os\.fork\s*\(")

DOWNLOAD_TO_SHELL = (
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

REVERSE_SHELL = (
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

DECODED_EXEC = (
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

DEVICE_WRITE = (
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
STARTUP_WRITE = (
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

WRITE_OP = re.compile(
    r"(?:>>?(?!&)|\b(?:tee|cp|mv|ln|install|rsync|touch|mkdir|rm|rmdir|unlink|chmod|chown|truncate)\b|"
    r"\b(?:sed|perl)\s+(?:-\S+\s+){0,4}?-[a-zA-Z]*i\b|\bopen\s*\([^\n]{0,256}?,\s*[\"'][wax+]|"
    r"\.(?:write_text|write_bytes|unlink|rename|replace|rmdir|mkdir|touch)\s*\(|"
    r"\b(?:shutil\.(?:copy\w*|move|rmtree)|os\.(?:rename|replace|remove|unlink|makedirs|mkdir|symlink|link))\s*\(|"
    r"\b(?:appendFile|writeFile|copyFile|rename|unlink|rmSync|mkdirSync)(?:Sync)?\s*\()"
)
HOOKBUS_SELF_EDIT = re.compile(r"\bhookbus\b" + _G + r"\bhooks\s+(?:write|create|enable|disable)\b")
HOOK_MANIFEST_NAMES = re.compile(
    r"\bHOOK\.(?:toml|md)\b|\bHOOKBUS_HOOKS_DIR\b|\bHOOKBUS_HOOK_DIR\}?/\.\.|(?:^|[\s\"'=(])\.\./"
    # the parent of a hook's folder is the hooks folder: Python / JS ways to name it
    r"|[\"']\.\.[\"']|\.parent\.parent\b|\.parents\[\s*[1-9]|dirname\(\s*(?:os\.path\.)?dirname\("
)
#: A handler that changes into the hooks folder (or further up) leaves its own folder.
CD_UP = re.compile(
    r"(?:^|[;&|(]\s*|\s)cd\s+[\"']?(?:\.\.(?:/|[\"'\s;&|)]|$)|/(?:[\"'\s;&|)]|$)|~/?(?:[\"'\s;&|)]|$))"
    r"|\b(?:os\.)?chdir\s*\(\s*[\"']\.\.[/\"']"
)

RMTREE_ROOT = re.compile(
    r"\brmtree\s*\(\s*(?:[\"'](?:/|~|/\*|~/)[\"']|os\.path\.expanduser\(\s*[\"']~/?[\"']\s*\)|"
    r"Path\.home\(\)|os\.environ\[\s*[\"']HOME[\"']\s*\]|[\"']/[\"'])\s*[,)]"
)
DANGEROUS_RM_TARGETS = frozenset(
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
CHMOD_WIDE = frozenset({"777", "0777", "a+rwx", "ugo+rwx", "o+rwx", "a+w", "o+w", "666", "0666"})
CHMOD_ROOTS = frozenset({"/", "/*", "~", "~/", "~/*", "$HOME", "${HOME}", "/etc", "/usr", "/home"})


# Cheap prefilters: a line without any of these words cannot match the group's patterns.
DOWNLOAD_WORDS = (
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
REVERSE_WORDS = ("/dev/tcp", "/dev/udp", "nc", "mkfifo", "socat", "dup2", "pty", "telnet", "-i")
DECODE_WORDS = (
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
STARTUP_WORDS = (
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
RM_CHMOD_WORDS = re.compile(r"\b(?:rm|chmod|find|rmtree)\b")
