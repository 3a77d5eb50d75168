"""Self-authoring: an agent (or a script) writes a hook, under the audit and the policy.

:func:`write_hook` takes a spec (name, description, events, priority, match, and an action
with either a ``command`` or ``script`` content plus ``language``), builds ``HOOK.toml`` and
the handler **in memory**, validates them with the manifest parser and audits them there,
and only then writes, atomically: the files are created inside a fresh hidden temporary
folder in ``hooks_dir`` (``O_EXCL | O_NOFOLLOW``, relative to the folder's descriptor),
then the hook folder is renamed into place. Nothing touches disk on a refusal; nothing is
ever written outside ``hooks_dir``; an existing hook is replaced only with ``replace``;
and the hook set is never reloaded here (the agent or a person runs ``hookbus reload``).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import tomlkit
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from hookbus.audit.autonomy import AutonomyPolicy, Bypass
from hookbus.audit.folder import AuditReport, Finding, audit_files
from hookbus.authoring.atomic import RefusalCode, Refused, atomic_write, check_hooks_dir
from hookbus.authoring.ownership import ownership_problem
from hookbus.authoring.pending import pending_dir
from hookbus.errors import HookBusError
from hookbus.hooks.manifest_model import AGENT_PREFIX

#: What a self-authored hook may be called: a folder name that cannot climb, hide or nest.
NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}\Z")
#: Largest timeout a self-authored hook may ask for, in seconds.
MAX_TIMEOUT_S = 300.0

Language = Literal["sh", "bash", "python"]
#: The author of a write whose caller says nothing about who it is.
DEFAULT_AGENT = f"{AGENT_PREFIX}unknown"
_HANDLERS: dict[str, tuple[str, str]] = {
    "sh": ("handler.sh", "sh handler.sh"),
    "bash": ("handler.sh", "bash handler.sh"),
    "python": ("handler.py", "python3 handler.py"),
}


class HttpInput(BaseModel):
    """An http action in a spec, as a manifest's ``[action.http]`` spells it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str
    method: Literal["POST", "PUT", "PATCH"] = "POST"
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_secs: float = Field(default=10.0, gt=0, le=MAX_TIMEOUT_S)

    @field_validator("method", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value


class ActionInput(BaseModel):
    """The action of a spec: a ``command``, ``script`` content in a ``language``, or
    ``http`` (``{"url", "method", "headers", "timeout_secs"}``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: str | list[str] | None = None
    script: str | None = None
    language: Language | None = None
    timeout_secs: float = Field(default=10.0, gt=0, le=MAX_TIMEOUT_S)
    env: dict[str, str] = Field(default_factory=dict)
    http: HttpInput | None = None

    @model_validator(mode="after")
    def _command_or_script(self) -> ActionInput:
        given = [k for k in ("command", "script", "http") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of action.command, action.script or action.http")
        if self.http is not None:
            if self.language is not None or self.env:
                raise ValueError("action.language and action.env go with a command or script")
            return self
        if self.script is not None and self.language is None:
            raise ValueError("action.script needs action.language (sh, bash or python)")
        if self.command is not None and self.language is not None:
            raise ValueError("action.language goes with action.script, not action.command")
        if isinstance(self.command, str) and not self.command.strip():
            raise ValueError("action.command must not be empty")
        if isinstance(self.command, list) and not self.command:
            raise ValueError("action.command must not be empty")
        return self


class HookSpec(BaseModel):
    """What ``hookbus hooks write`` and the MCP tool ``hook_write`` accept."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = ""
    events: list[str]
    priority: int = 100
    match: dict[str, Any] = Field(default_factory=dict)
    action: ActionInput
    on_error: Literal["allow", "deny"] = "allow"
    blocking: bool | None = None
    enabled: bool = True
    skip_security_audit: bool = False

    @field_validator("events", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("name")
    @classmethod
    def _safe_name(cls, value: str) -> str:
        if not NAME_RE.match(value):
            raise ValueError(
                f"{value!r} is not a safe hook name: use 1-64 lowercase letters, digits, "
                "'-' or '_', starting with a letter or digit (no '/', '..' or leading '.')"
            )
        return value


@dataclass
class WriteResult:
    """What a write did, or why it refused. ``ok`` false means nothing was written."""

    ok: bool
    name: str | None
    reason: str
    code: RefusalCode | None = None
    path: str | None = None
    files: list[str] = field(default_factory=list)
    replaced: bool = False
    findings: list[Finding] = field(default_factory=list)
    bypasses: list[Bypass] = field(default_factory=list)
    #: staged in ``.pending/`` for an operator's approval (``autonomy.level = "supervised"``)
    pending: bool = False
    author: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "name": self.name,
            "reason": self.reason,
            "code": self.code,
            "path": self.path,
            "files": list(self.files),
            "replaced": self.replaced,
            "findings": [f.to_dict() for f in self.findings],
            "bypasses": [b.to_dict() for b in self.bypasses],
            "reloaded": False,
            "pending": self.pending,
            "author": self.author,
            "next_step": _next_step(self),
        }


def hooks_dir_flag(root: Path | str) -> str:
    """`` --hooks-dir FOLDER``, to append to a command the user is told to paste: without it
    the command would act on the configured folder, not the one just written to."""
    return f" --hooks-dir {shlex.quote(str(Path(root).absolute()))}"


def _next_step(result: WriteResult) -> str | None:
    if not result.ok or result.path is None:
        return None
    written = Path(result.path).parent
    if result.pending:
        return (
            f"an operator approves it with `hookbus hooks approve {result.name}"
            f"{hooks_dir_flag(written.parent)}` (or rejects it); until then reloads leave it out"
        )
    return f"run `hookbus reload{hooks_dir_flag(written)}` to publish it"


def _refuse(
    code: RefusalCode,
    reason: str,
    *,
    name: str | None = None,
    findings: list[Finding] | None = None,
    bypasses: list[Bypass] | None = None,
) -> WriteResult:
    return WriteResult(
        ok=False,
        name=name,
        reason=reason,
        code=code,
        findings=list(findings or []),
        bypasses=list(bypasses or []),
    )


def _spec_error(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False)[:5]:
        loc = ".".join(str(p) for p in err.get("loc", ()))
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


def build_files(spec: HookSpec, author: str = DEFAULT_AGENT) -> dict[str, str]:
    """``HOOK.toml`` and the handler (if any), as text, for a spec."""
    action = spec.action
    files: dict[str, str] = {}
    shell: dict[str, Any] = {}
    if action.http is not None:
        built: dict[str, Any] = {"http": _plain(action.http.model_dump())}
    elif action.script is not None:
        assert action.language is not None
        handler, command = _HANDLERS[action.language]
        script = action.script if action.script.endswith("\n") else action.script + "\n"
        files[handler] = script
        shell["command"] = command
    else:
        assert action.command is not None
        shell["command"] = action.command
    if action.http is None:
        shell["timeout_secs"] = action.timeout_secs
        if action.env:
            shell["env"] = dict(action.env)
        built = {"shell": shell}
    doc = tomlkit.document()
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    doc.add(
        tomlkit.comment(f"Written by `hookbus hooks write` at {stamp}; audited before writing.")
    )
    doc.add("name", spec.name)
    doc.add("description", spec.description)
    doc.add("version", "0.1.0")
    doc.add("events", list(spec.events))
    doc.add("priority", spec.priority)
    doc.add("enabled", spec.enabled)
    doc.add("on_error", spec.on_error)
    doc.add("author", author)
    if spec.blocking is not None:
        doc.add("blocking", spec.blocking)
    if spec.skip_security_audit:
        doc.add("skip_security_audit", True)
    if spec.match:
        doc.add("match", _plain(spec.match))
    doc.add("action", built)
    files["HOOK.toml"] = tomlkit.dumps(doc)
    return files


def _plain(value: Any) -> Any:
    """Drop ``None`` values (TOML has no null) from nested data."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value if v is not None]
    return value


def _validate(files: dict[str, str], spec: HookSpec, hooks_dir: Path) -> str | None:
    """Parse the built manifest with the real parser; the problem as text, or ``None``."""
    try:
        from hookbus.hooks.manifest import parse_toml
    except ImportError:  # pragma: no cover - the manifest module ships with the package
        return None
    folder = hooks_dir / spec.name
    try:
        manifest = parse_toml(files["HOOK.toml"], folder / "HOOK.toml", folder=folder)
    except HookBusError as exc:
        return str(exc)
    if manifest.name != spec.name:  # pragma: no cover - built from the spec
        return f"the manifest's name {manifest.name!r} is not {spec.name!r}"
    return _program_problem(spec.action, files)


def _program_problem(action: ActionInput, files: Mapping[str, str]) -> str | None:
    """The loader's handler check, done before anything exists on disk: the program of the
    command must be a file being written or on PATH here, else the hook would not load."""
    if action.http is not None:
        return None
    command = action.command
    if command is None:
        command = _HANDLERS[action.language or "sh"][1]
    try:
        argv = shlex.split(command) if isinstance(command, str) else list(command)
    except ValueError as exc:
        return f"action.command: cannot split it like a shell would: {exc}"
    first = argv[0] if argv else ""
    if not first.strip():
        return "action.command: the first word (the program) is empty"
    if "/" in first and not os.path.isabs(first):
        if first.removeprefix("./") not in files:
            return f"action.command: {first} is not a file of the hook being written"
    elif "/" not in first and first not in ("python", "python3") and shutil.which(first) is None:
        return f"action.command: {first!r} is not on PATH on this machine"
    return None


def write_hook(
    spec: HookSpec | Mapping[str, Any],
    *,
    hooks_dir: Path | str,
    policy: AutonomyPolicy,
    replace: bool = False,
    author: str = DEFAULT_AGENT,
) -> WriteResult:
    """Write one hook into ``hooks_dir`` if the policy and the audit allow it.

    Order: policy gate, spec validation, build in memory (``author`` recorded in the
    manifest), manifest validation, audit as agent-authored (with ``hooks_dir`` known, so a
    script that writes into it is caught), ownership (an agent never replaces or shadows a
    hook another author wrote), folder safety checks, then the atomic write: into
    ``hooks_dir`` under ``autonomy.level = "full"``, into ``hooks_dir/.pending/`` otherwise,
    for an operator to approve. Any refusal returns ``ok=False`` with a ``code``, the reason
    and the findings, and leaves the disk untouched."""
    if not author.startswith(AGENT_PREFIX):
        author = f"{AGENT_PREFIX}{author}"
    bypasses: list[Bypass] = []
    gate = policy.write_gate()
    if gate.bypass is not None:
        bypasses.append(gate.bypass)
    raw_name = spec.name if isinstance(spec, HookSpec) else str(spec.get("name", "")) or None
    if not gate.allowed:
        return _refuse("policy", gate.reason, name=raw_name)
    try:
        parsed = spec if isinstance(spec, HookSpec) else HookSpec.model_validate(dict(spec))
    except ValidationError as exc:
        return _refuse("invalid", f"invalid hook spec: {_spec_error(exc)}", name=raw_name)
    except (ValueError, TypeError, RecursionError) as exc:
        return _refuse("invalid", f"invalid hook spec: {exc}", name=raw_name)
    root = Path(hooks_dir)
    try:
        files = build_files(parsed, author)
        problem = _validate(files, parsed, root.absolute())
    except (ValueError, TypeError, RecursionError) as exc:  # e.g. a match value TOML cannot hold
        return _refuse("invalid", f"the hook cannot be written as TOML: {exc}", name=parsed.name)
    if problem is not None:
        return _refuse("invalid", f"the hook would not load: {problem}", name=parsed.name)
    report: AuditReport = audit_files(
        parsed.name, files, policy=policy, hooks_dir=root.absolute(), agent=True
    )
    bypasses.extend(report.bypasses)
    blocking = [f for f in report.findings if policy.blocks_write(f.severity)]
    if blocking:
        worst = blocking[0]
        return _refuse(
            "audit",
            f"the audit refused the hook ({len(blocking)} finding(s) at or above "
            f"{'critical' if policy.level == 'full' else 'high'} under autonomy.level "
            f"{policy.level}; first: {worst.rule}: {worst.message})",
            name=parsed.name,
            findings=report.findings,
            bypasses=bypasses,
        )
    foreign = ownership_problem(root, parsed.name, author)
    if foreign is not None:
        return _refuse("ownership", foreign, name=parsed.name, bypasses=bypasses)
    pending = policy.level != "full"
    target = pending_dir(root) if pending else root
    for folder in dict.fromkeys((root, target)):
        unsafe = check_hooks_dir(folder, parsed.name, replace=replace)
        if unsafe is not None:
            code, reason, findings = unsafe
            return _refuse(code, reason, name=parsed.name, findings=findings, bypasses=bypasses)
    try:
        replaced = atomic_write(target, parsed.name, files, replace=replace)
    except Refused as exc:
        return _refuse(exc.code, exc.reason, name=parsed.name, bypasses=bypasses)
    except OSError as exc:
        return _refuse(
            "io-error",
            f"could not write the hook into {root}: {exc.strerror or exc} "
            "(nothing was left behind)",
            name=parsed.name,
            bypasses=bypasses,
        )
    done = "replaced" if replaced else "written"
    return WriteResult(
        ok=True,
        name=parsed.name,
        reason=f"{done} as pending (an operator runs `hookbus hooks approve {parsed.name}"
        f"{hooks_dir_flag(root)}`)"
        if pending
        else f"{done} (not reloaded: run `hookbus reload{hooks_dir_flag(root)}`)",
        path=str(target / parsed.name),
        files=sorted(files),
        replaced=replaced,
        findings=report.findings,
        bypasses=bypasses,
        pending=pending,
        author=author,
    )
