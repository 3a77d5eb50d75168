"""The audit's engine: findings, reports, and the rules applied to one hook's manifest and
files (already read, in memory). :mod:`hookbus.audit.folder` finds and reads the hooks and is
the public surface; :mod:`hookbus.audit.rules` holds the text rules.

Manifests are read as raw data (TOML, HOOK.md frontmatter, YAML), not through the pydantic
model, for two reasons: a manifest that does not validate must still be audited (a broken hook
is still a file in the bundle), and the audit must never crash on any input, so every rule
runs guarded and a failing rule becomes an ``audit-internal`` finding instead of an exception.
"""

from __future__ import annotations

import contextlib
import logging
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from hookbus.audit import rules
from hookbus.audit.autonomy import AutonomyPolicy, Bypass, Severity, severity_rank

if TYPE_CHECKING:
    from hookbus.bus.settings import Settings

logger = logging.getLogger(__name__)

MANIFEST_NAMES = ("HOOK.toml", "HOOK.md")
#: Folders never audited because bundles never carry them.
SKIP_DIR_NAMES = frozenset(
    {"__pycache__", ".git", ".hg", ".svn", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
)
SINGLE_FILE_SUFFIXES = (".yaml", ".yml")
#: At most this many files and folders are looked at in one hook folder.
MAX_ENTRIES_PER_HOOK = 1000
#: At most this many values are looked at in one manifest (a YAML alias bomb stops here).
MAX_MANIFEST_NODES = 20_000
#: Deepest nesting looked at in one manifest.
MAX_MANIFEST_DEPTH = 64

#: Rules an operator's (or an allowed manifest's) ``skip_security_audit`` sets aside: the
#: autonomy constraints. Every other rule (confinement, integrity, secrets) always applies.
AUTONOMY_RULES = frozenset(
    {
        "fork-bomb",
        "rm-rf",
        "download-to-shell",
        "reverse-shell",
        "decoded-exec",
        "chmod-777",
        "device-write",
        "startup-file-write",
        "shell-chaining",
        "command-not-allowed",
        "forbidden-path",
        "http-scheme",
        "http-metadata",
        "http-private",
        "http-not-allowlisted",
        "regex-backtracking",
    }
)

#: Every rule id and what it checks (``hookbus hooks audit --json`` users can rely on these).
RULES: dict[str, str] = {
    "symlink": "a symlink anywhere in a hook folder (or a hook folder that is one)",
    "special-file": "a FIFO, socket or device file in a hook folder",
    "path-escape": "'..', absolute or home paths in command, workdir or handler references",
    "file-too-large": "a file over security.max_file_bytes",
    "too-many-files": f"more than {MAX_ENTRIES_PER_HOOK} entries in one hook folder",
    "world-writable": "a file or folder anyone on the machine may change",
    "hooks-dir-write": "a command or handler that writes into the hooks folder",
    "fork-bomb": "fork bombs",
    "rm-rf": "recursive delete of /, ~ or *",
    "download-to-shell": "curl ... | sh, wget -O- | bash, bash <(curl ...)",
    "reverse-shell": "/dev/tcp/, nc -e, bash -i >&, mkfifo pipes, socat exec",
    "decoded-exec": "base64-decoded or fetched content fed to sh, eval or exec",
    "chmod-777": "chmod 777 / a+w on / or ~",
    "device-write": "dd to a device, mkfs",
    "startup-file-write": "writes to shell start-up files, authorized_keys, crontabs",
    "shell-chaining": "; && || | ` $( ) while autonomy.allow_shell_chaining is false",
    "command-not-allowed": "a program outside autonomy.allowed_commands (when set)",
    "forbidden-path": "a path under autonomy.forbidden_paths",
    "http-scheme": "an http action whose URL is not http(s) (file://, ...)",
    "http-metadata": "an http action to a cloud metadata or link-local address",
    "http-private": "an http action to loopback/private addresses (unless allow_private_http)",
    "http-not-allowlisted": "an http action to a host outside security.http_allowlist",
    "secret-in-manifest": "tokens, private keys or passwords written into a manifest",
    "credential-env": "env or header values that look like credentials",
    "manifest-skip-ignored": "skip_security_audit in a manifest, not allowed by config",
    "manifest-unparsable": "a manifest the audit cannot read",
    "manifest-too-complex": "a manifest nested too deep or too large to audit",
    "binary-handler": "a binary handler file, whose content cannot be audited",
    "hidden-text": "invisible or bidirectional control characters (Trojan Source)",
    "regex-backtracking": "a match.pattern with nested quantifiers (catastrophic backtracking)",
    "security-bypass": "skip_security_audit set findings aside (recorded, low severity)",
    "audit-internal": "a rule failed on this input (a bug in the audit; please report it)",
}

_SHELL_SUFFIXES = (".sh", ".bash", ".zsh", ".ksh", ".fish")
_SCRIPT_SUFFIXES = (
    *_SHELL_SUFFIXES,
    ".py",
    ".js",
    ".mjs",
    ".cjs",
    ".ts",
    ".rb",
    ".pl",
    ".php",
    ".ps1",
    ".lua",
)


@dataclass(frozen=True)
class Finding:
    """One thing the audit found. ``line`` is 1-based, ``None`` when it concerns the whole file."""

    rule: str
    severity: Severity
    file: str
    line: int | None
    message: str
    hook: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "file": self.file,
            "line": self.line,
            "message": self.message,
            "hook": self.hook,
        }

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{self.severity} {self.rule} {where}: {self.message}"


@dataclass
class AuditReport:
    """The findings of one audit, the bypasses it honoured, and the hooks it looked at."""

    findings: list[Finding] = field(default_factory=list)
    bypasses: list[Bypass] = field(default_factory=list)
    hooks: list[str] = field(default_factory=list)

    @property
    def critical(self) -> list[Finding]:
        """The findings that block a reload (truthy when there is any)."""
        return [f for f in self.findings if f.severity == "critical"]

    @property
    def ok(self) -> bool:
        return not self.critical

    def at_least(self, severity: str) -> list[Finding]:
        rank = severity_rank(severity)
        return [f for f in self.findings if severity_rank(f.severity) <= rank]

    def for_hook(self, name: str) -> list[Finding]:
        return [f for f in self.findings if f.hook == name]

    def bypasses_by_hook(self, *, effective_only: bool = True) -> dict[str, list[str]]:
        """For ``hookbus hooks list`` and MCP ``hooks_list``: hook name → bypass descriptions
        (by default only the bypasses that actually set a finding aside)."""
        out: dict[str, list[str]] = {}
        for b in self.bypasses:
            if effective_only and not b.suppressed:
                continue
            rules_set = ", ".join(sorted({getattr(f, "rule", str(f)) for f in b.suppressed}))
            note = f"{b.source}: {b.what}" + (f" (set aside: {rules_set})" if rules_set else "")
            out.setdefault(b.hook or "", []).append(note)
        return out

    def extend(self, other: AuditReport) -> None:
        self.findings.extend(other.findings)
        self.bypasses.extend(other.bypasses)
        self.hooks.extend(other.hooks)

    def to_dict(self) -> dict[str, Any]:
        counts = {s: 0 for s in ("critical", "high", "medium", "low")}
        for f in self.findings:
            counts[f.severity] = counts.get(f.severity, 0) + 1
        return {
            "ok": self.ok,
            "hooks": list(self.hooks),
            "counts": counts,
            "findings": [f.to_dict() for f in self.findings],
            "bypasses": [b.to_dict() for b in self.bypasses],
        }


# --- the engine -----------------------------------------------------------------------


@dataclass
class HookSource:
    """One hook as the engine sees it: a manifest (raw) and the files of its folder."""

    name: str
    prefix: str  # display prefix of its files ("guard/" or "")
    manifest_file: str | None  # display path of the manifest
    manifest_text: str | None
    files: dict[str, bytes]  # relative path → content, handler candidates only
    local_names: frozenset[str]  # every regular file name in the folder (relative)


class Collector:
    """The findings of one hook: deduplicated, at most ``MAX_FINDINGS_PER_RULE`` per rule
    and file (then one summary line), each rule run guarded."""

    def __init__(self, hook: str | None) -> None:
        self.hook = hook
        self.findings: list[Finding] = []
        self._seen: set[tuple[str, str, int | None, str]] = set()
        self._per_rule: dict[tuple[str, str], int] = {}

    def add(self, rule: str, severity: str, file: str, line: int | None, message: str) -> None:
        key = (rule, file, line, message)
        if key in self._seen:
            return
        count_key = (rule, file)
        count = self._per_rule.get(count_key, 0) + 1
        self._per_rule[count_key] = count
        if count > rules.MAX_FINDINGS_PER_RULE:
            if count == rules.MAX_FINDINGS_PER_RULE + 1:
                self._append(
                    rule,
                    severity,
                    file,
                    None,
                    f"more {rule} findings in this file (only the first "
                    f"{rules.MAX_FINDINGS_PER_RULE} are listed)",
                )
            return
        self._seen.add(key)
        self._append(rule, severity, file, line, message)

    def _append(self, rule: str, severity: str, file: str, line: int | None, message: str) -> None:
        sev: Severity = severity if severity in ("critical", "high", "medium", "low") else "high"  # type: ignore[assignment]
        self.findings.append(Finding(rule, sev, file, line, message, self.hook))

    def sink(self, file: str, line_offset: int = 0, fixed_line: int | None = None) -> rules.Sink:
        def _sink(rule: str, severity: str, line: int | None, message: str) -> None:
            if fixed_line is not None:
                line = fixed_line if line is None or line == 1 else fixed_line + line - 1
            elif line is not None:
                line += line_offset
            self.add(rule, severity, file, line, message)

        return _sink

    def guarded(
        self, file: str, label: str, fn: Callable[..., None], /, *args: Any, **kw: Any
    ) -> None:
        """Run one rule; a rule that raises becomes a finding, never a crash."""
        try:
            fn(*args, **kw)
        except RecursionError:
            self.add(
                "manifest-too-complex",
                "high",
                file,
                None,
                f"{label}: too deep to audit; flatten it",
            )
        except Exception as exc:
            logger.exception("audit rule %s failed on %s", label, file)
            self.add(
                "audit-internal",
                "high",
                file,
                None,
                f"the audit could not check {label} ({type(exc).__name__}: {exc}); "
                "review this file by hand",
            )


def decode_text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def is_binary(data: bytes) -> bool:
    return b"\x00" in data[:8192]


def parse_manifest_text(filename: str, text: str) -> Any:
    """Raw data of a manifest: TOML, HOOK.md's YAML frontmatter, or YAML. Raises on bad syntax."""
    if filename.endswith(".toml"):
        data: Any = tomllib.loads(text)
        if isinstance(data, dict) and isinstance(data.get("hook"), dict) and "name" not in data:
            merged = dict(data["hook"])
            merged.update({k: v for k, v in data.items() if k != "hook"})
            data = merged
        return data
    if filename.endswith(".md"):
        lines = text.splitlines()
        if not lines or lines[0].strip() != "---":
            raise ValueError("HOOK.md must start with a '---' line opening its YAML frontmatter")
        try:
            end = next(i for i in range(1, len(lines)) if lines[i].strip() in ("---", "..."))
        except StopIteration:
            raise ValueError("HOOK.md's frontmatter has no closing '---' line") from None
        return yaml.safe_load("\n".join(lines[1:end]))
    return yaml.safe_load(text)


@dataclass
class Extracted:
    commands: list[tuple[str, Any]] = field(default_factory=list)
    workdirs: list[tuple[str, str]] = field(default_factory=list)
    handler_refs: list[tuple[str, str]] = field(default_factory=list)
    urls: list[tuple[str, str]] = field(default_factory=list)
    patterns: list[tuple[str, str]] = field(default_factory=list)
    env_items: list[tuple[str, str, str]] = field(default_factory=list)  # (path, key, value)
    header_items: list[tuple[str, str, str]] = field(default_factory=list)
    skip_requested: bool = False
    too_complex: bool = False


_COMMAND_KEYS = frozenset({"command", "cmd", "run", "exec"})
_WORKDIR_KEYS = frozenset({"workdir", "cwd", "working_dir", "working_directory"})
_HANDLER_KEYS = frozenset({"script", "handler", "handler_path", "module_path"})
_URL_KEYS = frozenset({"url", "endpoint", "webhook", "webhook_url", "callback_url"})
_ENV_KEYS = frozenset({"env", "environment"})
_HEADER_KEYS = frozenset({"headers"})


def extract_manifest(data: Any) -> Extracted:
    """Walk a raw manifest of any shape and pick out what the rules look at."""
    out = Extracted()
    if isinstance(data, Mapping) and data.get("skip_security_audit") in (True, "true", "yes", 1):
        out.skip_requested = True
    budget = [MAX_MANIFEST_NODES]
    stack: list[tuple[str, Any, int]] = [("", data, 0)]
    while stack:
        path, node, depth = stack.pop()
        budget[0] -= 1
        if budget[0] < 0 or depth > MAX_MANIFEST_DEPTH:
            out.too_complex = True
            return out
        if isinstance(node, Mapping):
            for raw_key, value in list(node.items())[:MAX_MANIFEST_NODES]:
                key = str(raw_key)
                lkey = key.lower()
                sub = f"{path}.{key}" if path else key
                if lkey in _COMMAND_KEYS and (
                    isinstance(value, str)
                    or (
                        isinstance(value, list)
                        and all(isinstance(v, str | int | float) for v in value)
                    )
                ):
                    out.commands.append(
                        (sub, [str(v) for v in value] if isinstance(value, list) else value)
                    )
                elif lkey in _WORKDIR_KEYS and isinstance(value, str):
                    out.workdirs.append((sub, value))
                elif lkey in _HANDLER_KEYS and isinstance(value, str):
                    out.handler_refs.append((sub, value))
                elif lkey == "entrypoint" and isinstance(value, str):
                    module = value.split(":", 1)[0]
                    if "/" in module or "\\" in module or module.startswith("."):
                        out.handler_refs.append((sub, module))
                elif lkey in _URL_KEYS and isinstance(value, str):
                    out.urls.append((sub, value))
                elif lkey == "pattern" and isinstance(value, str):
                    out.patterns.append((sub, value))
                elif lkey in _ENV_KEYS and isinstance(value, Mapping):
                    out.env_items.extend(
                        (f"{sub}.{k}", str(k), v) for k, v in value.items() if isinstance(v, str)
                    )
                elif lkey in _HEADER_KEYS and isinstance(value, Mapping):
                    out.header_items.extend(
                        (f"{sub}.{k}", str(k), v) for k, v in value.items() if isinstance(v, str)
                    )
                if isinstance(value, Mapping | list):
                    stack.append((sub, value, depth + 1))
        elif isinstance(node, list):
            for i, value in enumerate(node[:MAX_MANIFEST_NODES]):
                if isinstance(value, Mapping | list):
                    stack.append((f"{path}[{i}]", value, depth + 1))
    return out


def line_of(text: str | None, *needles: str) -> int | None:
    """First line of ``text`` containing the first line of one of ``needles``."""
    if not text:
        return None
    for needle in needles:
        probe = needle.strip().splitlines()[0] if needle.strip() else ""
        if not probe:
            continue
        probe = probe[:200]
        for i, line in enumerate(text.splitlines(), start=1):
            if probe in line:
                return i
    return None


def classify_file(rel: str, data: bytes, referenced: set[str]) -> tuple[bool, bool]:
    """(is this a handler script, is it a shell script)?"""
    name = rel.rsplit("/", 1)[-1]
    head = data[:256].split(b"\n", 1)[0]
    shebang_shell = head.startswith(b"#!") and any(s in head for s in (b"sh", b"bash", b"zsh"))
    shebang_other = head.startswith(b"#!") and not shebang_shell
    shell = name.endswith(_SHELL_SUFFIXES) or shebang_shell
    script = (
        shell
        or shebang_other
        or name.endswith(_SCRIPT_SUFFIXES)
        or rel in referenced
        or name in referenced
    )
    if name in MANIFEST_NAMES:
        return False, False
    return script, shell


def audit_source(
    src: HookSource, policy: AutonomyPolicy, hooks_refs: tuple[str, ...], collector: Collector
) -> tuple[bool, bool]:
    """Run every content rule on one hook. Returns (manifest asked to skip, manifest parsed)."""
    mfile = src.manifest_file or f"{src.prefix}(manifest)"
    text = src.manifest_text
    data: Any = None
    parsed = False
    if text is not None and src.manifest_file is not None:
        try:
            data = parse_manifest_text(src.manifest_file, text)
            parsed = True
        except Exception as exc:
            reason = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
            collector.add(
                "manifest-unparsable",
                "medium",
                mfile,
                None,
                f"the audit cannot read this manifest ({reason}); fix it "
                "(`hookbus hooks validate` shows the error)",
            )
        collector.guarded(mfile, "secrets", rules.scan_secrets, text, collector.sink(mfile))
        collector.guarded(mfile, "hidden text", rules.scan_hidden_text, text, collector.sink(mfile))
    ex = Extracted()
    if parsed:
        ex = extract_manifest(data)
        if ex.too_complex:
            collector.add(
                "manifest-too-complex",
                "high",
                mfile,
                None,
                f"the manifest has more than {MAX_MANIFEST_NODES} values or "
                f"{MAX_MANIFEST_DEPTH} levels: simplify it",
            )
    forbidden = rules.forbidden_pattern(policy.forbidden_paths)
    referenced: set[str] = set()
    for path, command in ex.commands:
        key = path.rsplit(".", 1)[-1]
        first = command if isinstance(command, str) else (command[0] if command else "")
        sink = collector.sink(mfile, fixed_line=line_of(text, first, key))
        command_text = command if isinstance(command, str) else " ".join(command)
        for tok in rules.command_tokens(command):
            clean = tok[2:] if tok.startswith("./") else tok
            if clean in src.local_names:
                referenced.add(clean)
        guarded = collector.guarded
        guarded(mfile, f"{path} paths", rules.scan_command_paths, command, sink)
        guarded(
            mfile, f"{path} shell", rules.scan_dangerous, command_text, sink, hooks_refs=hooks_refs
        )
        payloads = rules.shell_payloads(command)
        if not policy.allow_shell_chaining:
            for shell_text in ([command] if isinstance(command, str) else []) + payloads:
                guarded(
                    mfile,
                    f"{path} chaining",
                    rules.scan_chaining,
                    shell_text,
                    sink,
                    severity="high",
                    what="command",
                )
        if policy.allowed_commands:
            for program_text in [command, *payloads]:
                guarded(
                    mfile,
                    f"{path} allowed commands",
                    rules.scan_allowed_commands,
                    program_text,
                    policy.allowed_commands,
                    src.local_names,
                    sink,
                )
        guarded(
            mfile,
            f"{path} forbidden paths",
            rules.scan_forbidden_paths,
            command_text,
            forbidden,
            sink,
            what="command",
        )
    for path, workdir in ex.workdirs:
        line = line_of(text, workdir, path.rsplit(".", 1)[-1])
        if rules.escapes_folder(workdir):
            collector.add(
                "path-escape",
                "critical",
                mfile,
                line,
                f"{path} = {workdir!r} leaves the hook folder: "
                "use a folder inside it (relative, without '..')",
            )
        collector.guarded(
            mfile,
            f"{path} forbidden paths",
            rules.scan_forbidden_paths,
            workdir,
            forbidden,
            collector.sink(mfile, fixed_line=line),
            what="workdir",
        )
    for path, ref in ex.handler_refs:
        if rules.escapes_folder(ref):
            collector.add(
                "path-escape",
                "critical",
                mfile,
                line_of(text, ref, path.rsplit(".", 1)[-1]),
                f"{path} = {ref!r} refers outside the hook folder: "
                "move the handler into the folder and refer to it relatively",
            )
        else:
            referenced.add(ref[2:] if ref.startswith("./") else ref)
    for path, url in ex.urls:
        collector.guarded(
            mfile,
            f"{path} url",
            rules.scan_url,
            url,
            collector.sink(mfile),
            allowlist=policy.http_allowlist,
            allow_private=policy.allow_private_http,
            line=line_of(text, url, path.rsplit(".", 1)[-1]),
        )
    for path, pattern in ex.patterns:
        collector.guarded(
            mfile,
            f"{path} regex",
            rules.scan_regex,
            pattern,
            collector.sink(mfile),
            line=line_of(text, pattern, "pattern"),
        )
    for path, key, value in ex.env_items + ex.header_items:
        line = line_of(text, value, key)
        why = rules.looks_like_credential(key, value)
        if why:
            collector.add(
                "credential-env",
                "high",
                mfile,
                line,
                f"{path} holds {why}: reference an environment variable instead "
                "(${NAME}, listed in security.env_allowlist)",
            )
        collector.guarded(
            mfile,
            f"{path} forbidden paths",
            rules.scan_forbidden_paths,
            value,
            forbidden,
            collector.sink(mfile, fixed_line=line),
            what="environment",
        )
    for rel, content in sorted(src.files.items()):
        audit_script(src.prefix, rel, content, referenced, policy, forbidden, hooks_refs, collector)
    return ex.skip_requested, parsed


def audit_script(
    prefix: str,
    rel: str,
    content: bytes,
    referenced: set[str],
    policy: AutonomyPolicy,
    forbidden: re.Pattern[str] | None,
    hooks_refs: tuple[str, ...],
    collector: Collector,
) -> None:
    """Content rules over one handler file (non-script files are left alone)."""
    display = f"{prefix}{rel}"
    if is_binary(content):
        if rel in referenced:
            collector.add(
                "binary-handler",
                "low",
                display,
                None,
                "a binary handler: the audit cannot read it; "
                "prefer a script, or review the binary's source",
            )
        return
    is_script, is_shell = classify_file(rel, content, referenced)
    if not is_script:
        return
    body = decode_text(content)
    sink = collector.sink(display)
    collector.guarded(display, "hidden text", rules.scan_hidden_text, body, sink)
    collector.guarded(display, "shell", rules.scan_dangerous, body, sink, hooks_refs=hooks_refs)
    if is_shell and not policy.allow_shell_chaining:
        collector.guarded(
            display,
            "chaining",
            rules.scan_chaining,
            body,
            sink,
            severity="medium",
            what="handler script",
        )
    collector.guarded(
        display,
        "forbidden paths",
        rules.scan_forbidden_paths,
        body,
        forbidden,
        sink,
        what="handler script",
    )


def finish_report(
    src_name: str,
    collector: Collector,
    policy: AutonomyPolicy,
    skip_requested: bool,
    mfile: str,
    manifest_text: str | None,
) -> AuditReport:
    """Apply ``skip_security_audit`` (config, then manifest) and build the report."""
    report = AuditReport(hooks=[src_name])
    # one credential, one finding: the env/header rule is the more precise of the two
    cred_lines = {(f.file, f.line) for f in collector.findings if f.rule == "credential-env"}
    findings = [
        f
        for f in collector.findings
        if not (f.rule == "secret-in-manifest" and (f.file, f.line) in cred_lines)
    ]
    source: str | None = None
    if policy.skip_security_audit:
        source = "config"
    elif skip_requested and policy.allow_manifest_skip:
        source = "manifest"
    elif skip_requested:
        findings.append(
            Finding(
                "manifest-skip-ignored",
                "high",
                mfile,
                line_of(manifest_text, "skip_security_audit"),
                "the manifest sets skip_security_audit, which is ignored unless an operator sets "
                "security.allow_manifest_skip = true: remove it",
                src_name,
            )
        )
    if source is not None:
        suppressed = tuple(f for f in findings if f.rule in AUTONOMY_RULES)
        findings = [f for f in findings if f.rule not in AUTONOMY_RULES]
        what = (
            "security.skip_security_audit = true: autonomy rules not enforced"
            if source == "config"
            else "manifest skip_security_audit honoured (security.allow_manifest_skip = true)"
        )
        bypass = Bypass(source, src_name, what, suppressed)  # type: ignore[arg-type]
        bypass.log()
        report.bypasses.append(bypass)
        if suppressed:
            # a low finding too, so the bypass travels wherever findings go (the bundle's
            # audit summary, `hookbus hooks audit`, hooks_list over MCP)
            rules_set = ", ".join(sorted({f.rule for f in suppressed}))
            findings.append(
                Finding(
                    "security-bypass",
                    "low",
                    mfile,
                    None,
                    f"{len(suppressed)} finding(s) ({rules_set}) set aside by {what}; "
                    "review them with the skip turned off",
                    src_name or None,
                )
            )
    findings.sort(key=lambda f: (severity_rank(f.severity), f.file, f.line or 0, f.rule))
    report.findings = findings
    return report


def resolve_policy(settings: Settings | None, policy: AutonomyPolicy | None) -> AutonomyPolicy:
    if policy is not None:
        return policy
    if settings is not None:
        return AutonomyPolicy.from_settings(settings)
    return AutonomyPolicy()


def hooks_dir_refs(hooks_dir: Path | None) -> tuple[str, ...]:
    if hooks_dir is None:
        return ()
    refs = {str(hooks_dir.absolute())}
    with contextlib.suppress(OSError, RuntimeError):
        refs.add(str(hooks_dir.resolve()))
    return tuple(sorted(refs))
