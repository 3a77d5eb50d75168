"""The audit's rule catalogue: every rule id, what it checks, and whether it is an
*autonomy* rule (set aside by an operator's ``skip_security_audit``) or a *confinement* rule
(always applied: symlinks, escaping paths, hooks that write hooks, secrets...).

``hookbus hooks audit --json`` users can rely on these ids; ``docs/security.md`` explains
each rule.
"""

from __future__ import annotations

from dataclasses import dataclass

#: At most this many files and folders are looked at in one hook folder.
MAX_ENTRIES_PER_HOOK = 1000


@dataclass(frozen=True)
class Rule:
    """One rule of the audit: its id, what it checks, whether it is an autonomy rule."""

    id: str
    checks: str
    autonomy: bool = False


CATALOGUE: tuple[Rule, ...] = (
    Rule(
        "symlink",
        "a symlink anywhere in a hook folder (or a hook folder that is one)",
        autonomy=False,
    ),
    Rule("special-file", "a FIFO, socket or device file in a hook folder", autonomy=False),
    Rule(
        "path-escape",
        "'..', absolute or home paths in command, workdir or handler references",
        autonomy=False,
    ),
    Rule("file-too-large", "a file over security.max_file_bytes", autonomy=False),
    Rule(
        "too-many-files",
        f"more than {MAX_ENTRIES_PER_HOOK} entries in one hook folder",
        autonomy=False,
    ),
    Rule("world-writable", "a file or folder anyone on the machine may change", autonomy=False),
    Rule(
        "hooks-dir-write", "a command or handler that writes into the hooks folder", autonomy=False
    ),
    Rule("fork-bomb", "fork bombs", autonomy=True),
    Rule("rm-rf", "recursive delete of /, ~ or *", autonomy=True),
    Rule("download-to-shell", "curl ... | sh, wget -O- | bash, bash <(curl ...)", autonomy=True),
    Rule("reverse-shell", "/dev/tcp/, nc -e, bash -i >&, mkfifo pipes, socat exec", autonomy=True),
    Rule(
        "decoded-exec", "base64-decoded or fetched content fed to sh, eval or exec", autonomy=True
    ),
    Rule("chmod-777", "chmod 777 / a+w on / or ~", autonomy=True),
    Rule("device-write", "dd to a device, mkfs", autonomy=True),
    Rule(
        "startup-file-write",
        "writes to shell start-up files, authorized_keys, crontabs",
        autonomy=True,
    ),
    Rule(
        "shell-chaining",
        "; && || | ` $( ) while autonomy.allow_shell_chaining is false",
        autonomy=True,
    ),
    Rule(
        "command-not-allowed",
        "a program outside autonomy.allowed_commands (when set)",
        autonomy=True,
    ),
    Rule("forbidden-path", "a path under autonomy.forbidden_paths", autonomy=True),
    Rule("http-scheme", "an http action whose URL is not http(s) (file://, ...)", autonomy=True),
    Rule(
        "http-metadata", "an http action to a cloud metadata or link-local address", autonomy=True
    ),
    Rule(
        "http-private",
        "an http action to loopback/private addresses (unless allow_private_http)",
        autonomy=True,
    ),
    Rule(
        "http-not-allowlisted",
        "an http action to a host outside security.http_allowlist",
        autonomy=True,
    ),
    Rule(
        "secret-in-manifest",
        "tokens, private keys or passwords written into a manifest",
        autonomy=False,
    ),
    Rule("credential-env", "env or header values that look like credentials", autonomy=False),
    Rule(
        "manifest-skip-ignored",
        "skip_security_audit in a manifest, not allowed by config",
        autonomy=False,
    ),
    Rule("manifest-unparsable", "a manifest the audit cannot read", autonomy=False),
    Rule(
        "manifest-too-complex", "a manifest nested too deep or too large to audit", autonomy=False
    ),
    Rule(
        "binary-handler", "a binary handler file, whose content cannot be audited", autonomy=False
    ),
    Rule(
        "hidden-text",
        "invisible or bidirectional control characters (Trojan Source)",
        autonomy=False,
    ),
    Rule(
        "regex-backtracking",
        "a match.pattern with nested quantifiers (catastrophic backtracking)",
        autonomy=True,
    ),
    # agent-authored hooks, on a parse tree (shell_parse, python_rules); an operator's
    # skip_security_audit (or an allowed manifest skip) sets them aside like the rest
    Rule(
        "shell-unresolvable",
        "agent-authored shell the audit cannot resolve: eval, computed commands, parse errors",
        autonomy=True,
    ),
    Rule(
        "python-unresolvable",
        "agent-authored python: eval/exec, dynamic imports, computed attributes, parse errors",
        autonomy=True,
    ),
    Rule(
        "pipe-to-shell",
        "agent-authored: a shell or interpreter reading its program from its input",
        autonomy=True,
    ),
    Rule(
        "write-outside-folder",
        "agent-authored: a write not provably inside the hook folder",
        autonomy=True,
    ),
    Rule(
        "credential-read",
        "agent-authored: credential files, secret variables, the whole environment",
        autonomy=True,
    ),
    Rule(
        "host-socket",
        "agent-authored: a connection to a unix socket of the host (a database, docker)",
        autonomy=True,
    ),
    # what an agent-authored manifest asks for at run time; the hook's build refuses the
    # first three too, so a worker leaves such a hook out alone
    Rule(
        "agent-env",
        "agent-authored: an env name agents may not set (LD_*, PYTHON*, BASH_ENV...)",
        autonomy=False,
    ),
    Rule(
        "http-header-env",
        "agent-authored: an http header naming a variable outside security.http_header_env",
        autonomy=False,
    ),
    Rule(
        "regex-engine",
        "a regex the linear-time engine (RE2) cannot run (backreferences, lookaround)",
        autonomy=False,
    ),
    Rule(
        "scope-widened",
        "agent-authored: the operator widened the agents whose events the hook acts on",
        autonomy=False,
    ),
    Rule(
        "security-bypass",
        "skip_security_audit set findings aside (recorded, low severity)",
        autonomy=False,
    ),
    Rule(
        "audit-internal",
        "a rule failed on this input (a bug in the audit; please report it)",
        autonomy=False,
    ),
)

#: Every rule id and what it checks.
RULES: dict[str, str] = {r.id: r.checks for r in CATALOGUE}
#: Rules an operator's (or an allowed manifest's) ``skip_security_audit`` sets aside: the
#: autonomy constraints. Every other rule (confinement, integrity, secrets) always applies.
AUTONOMY_RULES = frozenset(r.id for r in CATALOGUE if r.autonomy)
