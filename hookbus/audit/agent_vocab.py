"""What agent-authored code may not do, as data: the programs, builtins, paths and
variables the parsing audit (:mod:`hookbus.audit.shell_parse`,
:mod:`hookbus.audit.python_rules`) looks for. Change a list here, not in the walkers.
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

# --- python -----------------------------------------------------------------------------

PY_EVALUATORS = frozenset({"eval", "exec", "compile", "execfile", "builtins.eval", "builtins.exec"})
IMPORTERS = frozenset(
    {
        "__import__",
        "builtins.__import__",
        "importlib.import_module",
        "importlib.__import__",
        "imp.load_source",
        "importlib.util.spec_from_file_location",
        "runpy.run_path",
        "runpy.run_module",
    }
)
OPAQUE_MODULES = frozenset(
    {"ctypes", "cffi", "marshal", "pickle", "dill", "shelve", "code", "codeop", "runpy", "imp"}
)
NAMESPACES = frozenset({"globals", "locals", "vars", "builtins.globals"})
DUNDERS = frozenset(
    {
        "__builtins__",
        "__globals__",
        "__code__",
        "__subclasses__",
        "__dict__",
        "__getattribute__",
        "__bases__",
        "__mro__",
        "__import__",
        "__loader__",
        "__closure__",
    }
)
SHELL_RUNNERS = frozenset(
    {
        "os.system",
        "os.popen",
        "subprocess.getoutput",
        "subprocess.getstatusoutput",
        "asyncio.create_subprocess_shell",
    }
)
EXEC_RUNNERS = frozenset(
    {
        "subprocess.run",
        "subprocess.call",
        "subprocess.check_call",
        "subprocess.check_output",
        "subprocess.Popen",
        "asyncio.create_subprocess_exec",
        "pty.spawn",
    }
)
LOW_LEVEL_PREFIXES = ("os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.forkpty")
PATH_WRITERS = frozenset(
    {
        "os.remove",
        "os.unlink",
        "os.rmdir",
        "os.removedirs",
        "os.mkdir",
        "os.makedirs",
        "os.rename",
        "os.renames",
        "os.replace",
        "os.symlink",
        "os.link",
        "os.chmod",
        "os.chown",
        "os.truncate",
        "os.mkfifo",
        "os.mknod",
        "shutil.copy",
        "shutil.copy2",
        "shutil.copyfile",
        "shutil.copytree",
        "shutil.move",
        "shutil.rmtree",
        "shutil.chown",
    }
)
WRITE_METHODS = frozenset(
    {
        "write_text",
        "write_bytes",
        "touch",
        "mkdir",
        "unlink",
        "rmdir",
        "rename",
        "replace",
        "symlink_to",
        "hardlink_to",
        "chmod",
    }
)
OPENERS = frozenset({"open", "io.open", "codecs.open", "builtins.open"})
PATH_BUILDERS = frozenset(
    {
        "os.path.join",
        "pathlib.Path",
        "pathlib.PurePath",
        "os.path.dirname",
        "os.path.abspath",
        "os.path.realpath",
        "os.path.normpath",
        "os.fspath",
        "str",
    }
)
PATH_METHODS = frozenset({"joinpath", "resolve", "absolute", "with_suffix", "with_name"})
HOOK_DIR_GETTERS = frozenset({"os.environ.get", "os.getenv"})
CWD = frozenset({"os.getcwd", "pathlib.Path.cwd"})
ENVIRONS = frozenset({"os.environ", "os.environb", "posix.environ"})
#: Attribute names that reach a code runner: ``getattr(builtins, "eval")`` is ``eval``.
RISKY_ATTRIBUTES = frozenset(
    {
        "eval",
        "exec",
        "compile",
        "system",
        "popen",
        "execv",
        "execve",
        "execvp",
        "execl",
        "execlp",
        "spawnv",
        "spawnl",
        "posix_spawn",
        "fork",
        "import_module",
        "run",
        "call",
        "Popen",
        "check_output",
        "check_call",
        "getoutput",
        "loads",
    }
)
