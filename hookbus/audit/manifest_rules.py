"""The audit's manifest rules: each command, workdir, handler reference, URL, pattern, env
and header value a manifest holds (found by :mod:`hookbus.audit.manifest_raw`) checked by the
shell, http and text rules; an agent's commands also parsed (:mod:`hookbus.audit.shell.parse`).

Every rule runs guarded: a failing rule becomes an ``audit-internal`` finding, never an
exception, so the audit cannot crash on any input.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hookbus.audit import http_rules, secret_scan, textscan
from hookbus.audit.autonomy import AutonomyPolicy
from hookbus.audit.collector import Collector
from hookbus.audit.manifest_raw import (
    KEY_EXTRACTORS,
    MAX_MANIFEST_DEPTH,
    MAX_MANIFEST_NODES,
    Extracted,
    extract_manifest,
    line_of,
    parse_manifest_text,
)
from hookbus.audit.report import HookSource
from hookbus.audit.shell.chaining import scan_chaining
from hookbus.audit.shell.commands import (
    command_tokens,
    escapes_folder,
    scan_allowed_commands,
    scan_command_paths,
    shell_payloads,
)
from hookbus.audit.shell.parse import scan_shell
from hookbus.audit.shell.rules import scan_dangerous
from hookbus.hooks.actions.http import HEADER_VARIABLE
from hookbus.hooks.actions.raw import audit_targets
from hookbus.hooks.actions.sandbox import env_refusal
from hookbus.hooks.conditions import linear_regex_error


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


@dataclass
class _Context:
    """One manifest under audit: where findings go and what the rules share."""

    src: HookSource
    policy: AutonomyPolicy
    hooks_refs: tuple[str, ...]
    collector: Collector
    mfile: str
    text: str | None
    agent: bool
    forbidden: re.Pattern[str] | None
    referenced: set[str]

    def line(self, *needles: str) -> int | None:
        return line_of(self.text, *needles)


def _parse(src: HookSource, mfile: str, collector: Collector) -> tuple[Any, bool]:
    """The raw manifest (None when it does not parse: reported), and whether it parsed; the
    secret and hidden-text scans run on its text either way."""
    text = src.manifest_text
    if text is None or src.manifest_file is None:
        return None, False
    data: Any = None
    parsed = False
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
    collector.guarded(mfile, "hidden text", textscan.scan_hidden_text, text, collector.sink(mfile))
    return data, parsed


def _command_rules(ctx: _Context, path: str, command: Any) -> None:
    """One command: its paths, the text rules, the parse (agents), chaining, the allowed
    programs and the forbidden paths."""
    key = path.rsplit(".", 1)[-1]
    first = command if isinstance(command, str) else (command[0] if command else "")
    sink = ctx.collector.sink(ctx.mfile, fixed_line=ctx.line(first, key))
    command_text = command if isinstance(command, str) else " ".join(command)
    for tok in command_tokens(command):
        clean = tok[2:] if tok.startswith("./") else tok
        if clean in ctx.src.local_names:
            ctx.referenced.add(clean)
    guarded, mfile, policy = ctx.collector.guarded, ctx.mfile, ctx.policy
    guarded(mfile, f"{path} paths", scan_command_paths, command, sink)
    guarded(
        mfile,
        f"{path} shell",
        scan_dangerous,
        command_text,
        sink,
        hooks_refs=ctx.hooks_refs,
    )
    if ctx.agent:
        parsed_text = command if isinstance(command, str) else shlex.join(command)
        guarded(mfile, f"{path} parsed", scan_shell, parsed_text, sink)
    payloads = shell_payloads(command)
    if not policy.allow_shell_chaining:
        for shell_text in ([command] if isinstance(command, str) else []) + payloads:
            guarded(
                mfile,
                f"{path} chaining",
                scan_chaining,
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
                scan_allowed_commands,
                program_text,
                policy.allowed_commands,
                ctx.src.local_names,
                sink,
            )
    guarded(
        mfile,
        f"{path} forbidden paths",
        textscan.scan_forbidden_paths,
        command_text,
        ctx.forbidden,
        sink,
        what="command",
    )


def _workdir_rules(ctx: _Context, path: str, workdir: str) -> None:
    line = ctx.line(workdir, path.rsplit(".", 1)[-1])
    if escapes_folder(workdir):
        ctx.collector.add(
            "path-escape",
            "critical",
            ctx.mfile,
            line,
            f"{path} = {workdir!r} leaves the hook folder: "
            "use a folder inside it (relative, without '..')",
        )
    ctx.collector.guarded(
        ctx.mfile,
        f"{path} forbidden paths",
        textscan.scan_forbidden_paths,
        workdir,
        ctx.forbidden,
        ctx.collector.sink(ctx.mfile, fixed_line=line),
        what="workdir",
    )


def _handler_rules(ctx: _Context, path: str, ref: str) -> None:
    if escapes_folder(ref):
        ctx.collector.add(
            "path-escape",
            "critical",
            ctx.mfile,
            ctx.line(ref, path.rsplit(".", 1)[-1]),
            f"{path} = {ref!r} refers outside the hook folder: "
            "move the handler into the folder and refer to it relatively",
        )
    else:
        ctx.referenced.add(ref[2:] if ref.startswith("./") else ref)


def _url_rules(ctx: _Context, path: str, url: str) -> None:
    ctx.collector.guarded(
        ctx.mfile,
        f"{path} url",
        http_rules.scan_url,
        url,
        ctx.collector.sink(ctx.mfile),
        allowlist=ctx.policy.http_allowlist,
        allow_private=ctx.policy.allow_private_http,
        line=ctx.line(url, path.rsplit(".", 1)[-1]),
    )


def _pattern_rules(ctx: _Context, path: str, pattern: str) -> None:
    line = ctx.line(pattern, path.rsplit(".", 1)[-1])
    ctx.collector.guarded(
        ctx.mfile,
        f"{path} regex",
        textscan.scan_regex,
        pattern,
        ctx.collector.sink(ctx.mfile),
        line=line,
    )
    error = linear_regex_error(pattern)
    if error is not None:
        ctx.collector.add("regex-engine", "critical", ctx.mfile, line, f"{path}: {error}")


def _value_rules(ctx: _Context, path: str, key: str, value: str) -> None:
    """An env or header value: no literal credential, no forbidden path."""
    line = ctx.line(value, key)
    why = secret_scan.looks_like_credential(key, value)
    if why:
        ctx.collector.add(
            "credential-env",
            "high",
            ctx.mfile,
            line,
            f"{path} holds {why}: reference an environment variable instead "
            "(${NAME}, listed in security.env_allowlist)",
        )
    ctx.collector.guarded(
        ctx.mfile,
        f"{path} forbidden paths",
        textscan.scan_forbidden_paths,
        value,
        ctx.forbidden,
        ctx.collector.sink(ctx.mfile, fixed_line=line),
        what="environment",
    )


def _env_rules(ctx: _Context, path: str, key: str, value: str) -> None:
    _value_rules(ctx, path, key, value)
    if not ctx.agent:
        return
    refusal = env_refusal(key, ctx.policy.agent_env_allowlist)
    if refusal is not None:
        ctx.collector.add("agent-env", "critical", ctx.mfile, ctx.line(key), f"{path}: {refusal}")


def _header_rules(ctx: _Context, path: str, key: str, value: str) -> None:
    _value_rules(ctx, path, key, value)
    if not ctx.agent:
        return
    outside = [v for v in HEADER_VARIABLE.findall(value) if v not in ctx.policy.http_header_env]
    if outside:
        ctx.collector.add(
            "http-header-env",
            "critical",
            ctx.mfile,
            ctx.line(value, key),
            f"{path} sends ${{{outside[0]}}}, which is not in security.http_header_env: an "
            "agent's hook may send only the variables the operator lists there (the hook "
            "would not load)",
        )


def _scope_rules(ctx: _Context, path: str, agent: str) -> None:
    if ctx.agent:
        reach = "every agent" if agent == "*" else f"agent {agent!r}"
        ctx.collector.add(
            "scope-widened",
            "medium",
            ctx.mfile,
            ctx.line(path.split("[", 1)[0].rsplit(".", 1)[-1]),
            f"this agent's hook also acts on the events of {reach} (an operator's approval "
            "widened it)",
        )


def _too_complex(ctx: _Context) -> None:
    ctx.collector.add(
        "manifest-too-complex",
        "high",
        ctx.mfile,
        None,
        f"the manifest has more than {MAX_MANIFEST_NODES} values or "
        f"{MAX_MANIFEST_DEPTH} levels: simplify it",
    )


#: The manifest rules: each kind of value the extraction found, and the rule it runs.
_RULES: tuple[tuple[str, Callable[..., None]], ...] = (
    ("commands", _command_rules),
    ("workdirs", _workdir_rules),
    ("handler_refs", _handler_rules),
    ("urls", _url_rules),
    ("patterns", _pattern_rules),
    ("env_items", _env_rules),
    ("header_items", _header_rules),
    ("scope", _scope_rules),
)


def add_declared_targets(ex: Extracted, data: Any) -> None:
    """Add to ``ex`` every command, path, URL, environment and header field that the
    action-kind table declares for the manifest's action and the walk by key name did not
    pick up, so a kind whose target sits under a key of its own is audited all the same."""
    seen = {path for path, _ in (*ex.commands, *ex.workdirs, *ex.handler_refs, *ex.urls)}
    seen |= {path.rpartition(".")[0] for path, _, _ in (*ex.env_items, *ex.header_items)}
    for path, target, value in audit_targets(data):
        if path not in seen:  # read as the walk reads a key of that name
            KEY_EXTRACTORS[target](ex, path, value)


def audit_manifest(
    src: HookSource, policy: AutonomyPolicy, hooks_refs: tuple[str, ...], collector: Collector
) -> ManifestAudit:
    """Run every manifest rule on one hook."""
    mfile = src.manifest_file or f"{src.prefix}(manifest)"
    data, parsed = _parse(src, mfile, collector)
    ex = extract_manifest(data) if parsed else Extracted()
    if parsed:
        add_declared_targets(ex, data)
    ctx = _Context(
        src=src,
        policy=policy,
        hooks_refs=hooks_refs,
        collector=collector,
        mfile=mfile,
        text=src.manifest_text,
        agent=src.agent if src.agent is not None else agent_authored(data),
        forbidden=textscan.forbidden_pattern(policy.forbidden_paths),
        referenced=set(),
    )
    if ex.too_complex:
        _too_complex(ctx)
    for field_name, rule in _RULES:
        for item in getattr(ex, field_name):
            rule(ctx, *item)
    return ManifestAudit(ex.skip_requested, parsed, ctx.referenced, ctx.forbidden, ctx.agent)
