"""What agent-authored shell may not do, as data: the programs, paths and variables the
parsing audit (:mod:`hookbus.audit.shell.parse`, :mod:`hookbus.audit.shell.effects`) looks
for, and the limits and secret patterns the Python audit shares. Python's own vocabulary
is :mod:`hookbus.audit.python.vocab`. Change a list here, not in the walkers.
"""

from __future__ import annotations

import re

# --- shell ----------------------------------------------------------------------------

MAX_PARSE_CHARS = 256 * 1024
#: ``sh -c`` inside ``sh -c`` inside ...: deeper than this is refused.
MAX_NESTING = 8

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "ash", "fish", "csh", "tcsh"})
PYTHONS = frozenset({"python", "python3", "python2", "pypy", "pypy3"})
INLINE_INTERPRETERS = {
    "perl": ("-e", "-E"),
    "ruby": ("-e",),
    "node": ("-e", "--eval", "-p", "--print"),
    "nodejs": ("-e", "--eval"),
    "php": ("-r",),
    "lua": ("-e",),
    "osascript": ("-e",),
    "pwsh": ("-c", "-command"),
    "powershell": ("-c", "-command"),
}
SH_EVALUATORS = frozenset({"eval", "trap", "alias", "fc", "let"})
#: Programs that run the rest of their words as a command, unchanged: stripped (with their
#: options and numeric option values) so the command itself is judged. Programs that change
#: privileges or take a command as one string have rules of their own
#: (:mod:`hookbus.audit.shell.runners`).
PREFIXES = frozenset(
    {
        "env",
        "exec",
        "nohup",
        "command",
        "builtin",
        "time",
        "nice",
        "ionice",
        "chrt",
        "taskset",
        "numactl",
        "cpulimit",
        "setsid",
        "stdbuf",
        "timeout",
        "unbuffer",
        "watch",
    }
)
#: An option value of a prefix (``nice -n 5``, ``taskset -c 0-3``, ``timeout 5s``).
PREFIX_VALUE = re.compile(r"[0-9][0-9a-fA-Fx.,:-]*[smhd]?")
#: Modules ``python -m`` may run: their arguments are data, never code.
SAFE_PY_MODULES = frozenset({"json.tool"})
#: Variables that make a shell, the loader or an interpreter run code of their own choosing
#: when set for a command (``BASH_ENV=./x bash ...``, ``env LD_PRELOAD=... prog``).
STARTUP_VARIABLE = re.compile(
    r"(?:BASH_ENV|ENV|PROMPT_COMMAND|PS[04]|SHELLOPTS|BASHOPTS|BASH_FUNC_\w*|LD_\w+|DYLD_\w+|"
    r"PYTHON\w*|PERL5?\w*|RUBY\w*|NODE_OPTIONS|NODE_PATH|GIT_\w+|GCONV_PATH|"
    r"GLIBC_TUNABLES|LUA_\w+|JAVA_TOOL_OPTIONS)\Z"
)
WRITERS = frozenset(
    {
        "tee",
        "cp",
        "mv",
        "install",
        "ln",
        "touch",
        "mkdir",
        "rm",
        "rmdir",
        "unlink",
        "chmod",
        "chown",
        "chgrp",
        "truncate",
        "fallocate",
        "shred",
        "rsync",
        "mkfifo",
        "mknod",
        "split",
        "csplit",
    }
)
ENV_DUMPERS = frozenset({"env", "printenv", "set", "export", "declare", "typeset", "compgen"})
SAFE_DEVICES = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
HOOK_DIR_VAR = re.compile(r"^\$(?:HOOKBUS_HOOK_DIR|\{HOOKBUS_HOOK_DIR\})(?:/|$)")

CREDENTIAL_PATHS = re.compile(
    r"(?:\.ssh(?:/|\b)|\.aws(?:/|\b)|\.gnupg|\.netrc|\.git-credentials|\.docker/config\.json|"
    r"\.kube/config|\.config/gcloud|\.azure/|\.pgpass|\.npmrc|\.pypirc|/etc/shadow|"
    r"/etc/gshadow|/etc/sudoers|/proc/[^/\s'\"]+/(?:environ|mem|maps|auxv|cmdline)|/var/run/secrets|"
    r"hookbus\.toml|"
    r"/run/secrets|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|\.vault-token|\.boto\b|\.s3cfg)"
)
SECRET_NAME = re.compile(
    r"(?i)(?:secret|token|passw|api_?key|private_?key|credential|access_?key|auth_?token|"
    r"authorization|cookie|^redis_url$|^hookbus_redis_url$|^database_url$|_dsn$)"
)
#: ANSI-C escapes that spell characters a reviewer cannot read (``\x72`` is ``r``).
OPAQUE_ESCAPE = re.compile(r"\\(?:x[0-9A-Fa-f]|u[0-9A-Fa-f]|U[0-9A-Fa-f]|[0-7]|c.)")
ANSI_C = re.compile(r"\$'((?:[^'\\]|\\.){0,4096})'")
