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

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "ash", "fish", "csh", "tcsh", "busybox"})
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
PREFIXES = frozenset(
    {
        "env",
        "sudo",
        "doas",
        "exec",
        "nohup",
        "command",
        "builtin",
        "time",
        "nice",
        "ionice",
        "setsid",
        "stdbuf",
        "timeout",
        "unbuffer",
        "chroot",
        "su",
        "xargs",
        "parallel",
        "watch",
        "flock",
    }
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
    r"/etc/gshadow|/etc/sudoers|/proc/[^/\s'\"]+/(?:environ|mem|maps|auxv)|/var/run/secrets|"
    r"/run/secrets|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|\.vault-token|\.boto\b|\.s3cfg)"
)
SECRET_NAME = re.compile(
    r"(?i)(?:secret|token|passw|api_?key|private_?key|credential|access_?key|auth_?token|"
    r"authorization|cookie|^redis_url$|^hookbus_redis_url$|^database_url$|_dsn$)"
)
#: ANSI-C escapes that spell characters a reviewer cannot read (``\x72`` is ``r``).
OPAQUE_ESCAPE = re.compile(r"\\(?:x[0-9A-Fa-f]|u[0-9A-Fa-f]|U[0-9A-Fa-f]|[0-7]|c.)")
ANSI_C = re.compile(r"\$'((?:[^'\\]|\\.){0,4096})'")
