"""The audit's manifest rules: each command, workdir, handler reference, URL, pattern, env
and header value a manifest holds (found by :mod:`hookbus.audit.manifest_raw`) checked by the
shell, http and text rules; an agent's commands also parsed (:mod:`hookbus.audit.shell.parse`).

Every rule runs guarded: a failing rule becomes an ``audit-internal`` finding, never an
exception, so the audit cannot crash on any input.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hookbus.audit import http_rules, secret_scan, textscan
from hookbus.audit.autonomy import AutonomyPolicy
from hookbus.audit.collector import Collector
from hookbus.audit.manifest_raw import (
    MAX_MANIFEST_DEPTH,
    MAX_MANIFEST_NODES,
    Extracted,
    extract_manifest,
    line_of,
    parse_manifest_text,
)
from hookbus.audit.report import HookSource
from hookbus.audit.shell import chaining as shell_chaining
from hookbus.audit.shell import commands as shell_commands
from hookbus.audit.shell import parse as shell_parse
from hookbus.audit.shell import rules as shell_rules


@dataclass
class ManifestAudit:
    """What the manifest rules leave for the script rules: whether the manifest asked to skip
    the audit, whether it parsed, the handler files it names, the forbidden-path pattern."""

    skip_requested: bool
    parsed: bool
    referenced: set[str]
    forbidden: re.Pattern[str] | None
    agent: bool = False


def agent_authored(data: Any) -> bool:
    """Does a raw manifest name an agent as its author (``author = "agent:<id>"``)?"""
    return isinstance(data, Mapping) and str(data.get("author", "")).startswith("agent")


def audit_manifest(
    src: HookSource, policy: AutonomyPolicy, hooks_refs: tuple[str, ...], collector: Collector
) -> ManifestAudit:
    """Run every manifest rule on one hook."""
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
        collector.guarded(mfile, "secrets", secret_scan.scan_secrets, text, collector.sink(mfile))
        collector.guarded(
            mfile, "hidden text", textscan.scan_hidden_text, text, collector.sink(mfile)
        )
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
    forbidden = textscan.forbidden_pattern(policy.forbidden_paths)
    referenced: set[str] = set()
    agent = src.agent if src.agent is not None else agent_authored(data)
    for path, command in ex.commands:
        key = path.rsplit(".", 1)[-1]
        first = command if isinstance(command, str) else (command[0] if command else "")
        sink = collector.sink(mfile, fixed_line=line_of(text, first, key))
        command_text = command if isinstance(command, str) else " ".join(command)
        for tok in shell_commands.command_tokens(command):
            clean = tok[2:] if tok.startswith("./") else tok
            if clean in src.local_names:
                referenced.add(clean)
        guarded = collector.guarded
        guarded(mfile, f"{path} paths", shell_commands.scan_command_paths, command, sink)
        guarded(
            mfile,
            f"{path} shell",
            shell_rules.scan_dangerous,
            command_text,
            sink,
            hooks_refs=hooks_refs,
        )
        if agent:
            parsed_text = command if isinstance(command, str) else shlex.join(command)
            guarded(mfile, f"{path} parsed", shell_parse.scan_shell, parsed_text, sink)
        payloads = shell_commands.shell_payloads(command)
        if not policy.allow_shell_chaining:
            for shell_text in ([command] if isinstance(command, str) else []) + payloads:
                guarded(
                    mfile,
                    f"{path} chaining",
                    shell_chaining.scan_chaining,
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
                    shell_commands.scan_allowed_commands,
                    program_text,
                    policy.allowed_commands,
                    src.local_names,
                    sink,
                )
        guarded(
            mfile,
            f"{path} forbidden paths",
            textscan.scan_forbidden_paths,
            command_text,
            forbidden,
            sink,
            what="command",
        )
    for path, workdir in ex.workdirs:
        line = line_of(text, workdir, path.rsplit(".", 1)[-1])
        if shell_commands.escapes_folder(workdir):
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
            textscan.scan_forbidden_paths,
            workdir,
            forbidden,
            collector.sink(mfile, fixed_line=line),
            what="workdir",
        )
    for path, ref in ex.handler_refs:
        if shell_commands.escapes_folder(ref):
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
            http_rules.scan_url,
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
            textscan.scan_regex,
            pattern,
            collector.sink(mfile),
            line=line_of(text, pattern, "pattern"),
        )
    for path, key, value in ex.env_items + ex.header_items:
        line = line_of(text, value, key)
        why = secret_scan.looks_like_credential(key, value)
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
            textscan.scan_forbidden_paths,
            value,
            forbidden,
            collector.sink(mfile, fixed_line=line),
            what="environment",
        )
    return ManifestAudit(ex.skip_requested, parsed, referenced, forbidden, agent)
