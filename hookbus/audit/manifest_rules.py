"""The audit's manifest rules: a manifest read as raw data (TOML, HOOK.md frontmatter, YAML),
walked for what the rules look at (commands, workdirs, handler references, URLs, patterns,
env and header values), and each checked.

Manifests are read as raw data, not through the pydantic model, for two reasons: a manifest
that does not validate must still be audited (a broken hook is still a file in the bundle),
and the audit must never crash on any input, so every rule runs guarded and a failing rule
becomes an ``audit-internal`` finding instead of an exception.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from hookbus.audit import http_rules, shell_commands, shell_parse, shell_rules, textscan
from hookbus.audit.autonomy import AutonomyPolicy
from hookbus.audit.report import Collector, HookSource

#: At most this many values are looked at in one manifest (a YAML alias bomb stops here).
MAX_MANIFEST_NODES = 20_000
#: Deepest nesting looked at in one manifest.
MAX_MANIFEST_DEPTH = 64


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
        collector.guarded(mfile, "secrets", textscan.scan_secrets, text, collector.sink(mfile))
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
                    shell_rules.scan_chaining,
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
        why = textscan.looks_like_credential(key, value)
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
