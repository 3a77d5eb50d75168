"""The audit's engine: one hook's manifest and files (already read, in memory) through the
manifest rules (:mod:`hookbus.audit.manifest_rules`) and the script rules
(:mod:`hookbus.audit.shell.rules`, :mod:`hookbus.audit.textscan`), then
``skip_security_audit`` applied and the report built. :mod:`hookbus.audit.folder` finds and
reads the hooks and is the public surface.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import TYPE_CHECKING

from hookbus.audit import textscan
from hookbus.audit.autonomy import AutonomyPolicy, Bypass, severity_rank
from hookbus.audit.collector import Collector
from hookbus.audit.manifest_raw import line_of
from hookbus.audit.manifest_rules import audit_manifest
from hookbus.audit.python.compared import blank_compared
from hookbus.audit.python.rules import scan_python
from hookbus.audit.report import AuditReport, Finding, HookSource
from hookbus.audit.ruleset import AUTONOMY_RULES
from hookbus.audit.shell.chaining import scan_chaining
from hookbus.audit.shell.parse import scan_shell
from hookbus.audit.shell.rules import scan_dangerous

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings

MANIFEST_NAMES = ("HOOK.toml", "HOOK.md")
SINGLE_FILE_SUFFIXES = (".yaml", ".yml")

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


def decode_text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def is_binary(data: bytes) -> bool:
    return b"\x00" in data[:8192]


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
    found = audit_manifest(src, policy, hooks_refs, collector)
    for rel, content in sorted(src.files.items()):
        audit_script(
            src.prefix,
            rel,
            content,
            found.referenced,
            policy,
            found.forbidden,
            hooks_refs,
            collector,
            agent=found.agent,
        )
    return found.skip_requested, found.parsed


def audit_script(
    prefix: str,
    rel: str,
    content: bytes,
    referenced: set[str],
    policy: AutonomyPolicy,
    forbidden: re.Pattern[str] | None,
    hooks_refs: tuple[str, ...],
    collector: Collector,
    *,
    agent: bool = False,
) -> None:
    """Content rules over one handler file (non-script files are left alone). An agent's
    scripts are also parsed (:mod:`hookbus.audit.shell.parse`,
    :mod:`hookbus.audit.python.rules`), and what cannot be parsed is refused."""
    display = f"{prefix}{rel}"
    if is_binary(content):
        if agent:
            collector.add(
                "binary-handler",
                "critical",
                display,
                None,
                "a binary file in an agent-authored hook: the audit cannot read it; remove it",
            )
        elif rel in referenced:
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
    collector.guarded(display, "hidden text", textscan.scan_hidden_text, body, sink)
    # a python guard's compared strings ("| sh" in cmd) are data: the text rules skip them
    text = blank_compared(body) if _is_python(rel, content) else body
    collector.guarded(display, "shell", scan_dangerous, text, sink, hooks_refs=hooks_refs)
    if agent:
        _parse_script(display, rel, content, body, is_shell, collector)
    if is_shell and not policy.allow_shell_chaining:
        collector.guarded(
            display,
            "chaining",
            scan_chaining,
            body,
            sink,
            severity="medium",
            what="handler script",
        )
    collector.guarded(
        display,
        "forbidden paths",
        textscan.scan_forbidden_paths,
        body,
        forbidden,
        sink,
        what="handler script",
    )


def _is_python(rel: str, content: bytes) -> bool:
    head = content[:256].split(b"\n", 1)[0]
    return rel.endswith(".py") or (head.startswith(b"#!") and b"python" in head)


def _parse_script(
    display: str, rel: str, content: bytes, body: str, is_shell: bool, collector: Collector
) -> None:
    sink = collector.sink(display)
    if _is_python(rel, content):
        collector.guarded(display, "python parsed", scan_python, body, sink)
    elif is_shell:
        collector.guarded(display, "shell parsed", scan_shell, body, sink)
    else:
        collector.add(
            "shell-unresolvable",
            "critical",
            display,
            None,
            "an agent-authored hook may carry only sh, bash and python scripts, which the audit "
            "parses: rewrite this handler in one of them",
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
