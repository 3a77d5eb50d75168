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

import contextlib
import os
import re
import shlex
import shutil
import stat
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import tomlkit
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from hookbus.audit.autonomy import AutonomyPolicy, Bypass
from hookbus.audit.folder import AuditReport, Finding, audit_files
from hookbus.errors import HookBusError

#: What a self-authored hook may be called: a folder name that cannot climb, hide or nest.
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
#: Largest timeout a self-authored hook may ask for, in seconds.
MAX_TIMEOUT_S = 300.0
#: Prefix of the temporary folders a write stages in (hidden: loaders skip it).
STAGING_PREFIX = ".hookbus-write-"
#: A staging folder older than this (seconds) belongs to a writer that died; it is removed.
STALE_STAGING_S = 600

Language = Literal["sh", "bash", "python"]
_HANDLERS: dict[str, tuple[str, str]] = {
    "sh": ("handler.sh", "sh handler.sh"),
    "bash": ("handler.sh", "bash handler.sh"),
    "python": ("handler.py", "python3 handler.py"),
}
RefusalCode = Literal["policy", "invalid", "audit", "exists", "unsafe-path", "io-error"]


class ActionInput(BaseModel):
    """The action of a spec: a ``command``, or ``script`` content in a ``language``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: str | list[str] | None = None
    script: str | None = None
    language: Language | None = None
    timeout_secs: float = Field(default=10.0, gt=0, le=MAX_TIMEOUT_S)
    env: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _command_or_script(self) -> ActionInput:
        if (self.command is None) == (self.script is None):
            raise ValueError("give exactly one of action.command or action.script")
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
            "next_step": "run `hookbus reload` to publish it" if self.ok else None,
        }


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


def build_files(spec: HookSpec) -> dict[str, str]:
    """``HOOK.toml`` and the handler (if any), as text, for a spec."""
    action = spec.action
    files: dict[str, str] = {}
    shell: dict[str, Any] = {}
    if action.script is not None:
        assert action.language is not None
        handler, command = _HANDLERS[action.language]
        script = action.script if action.script.endswith("\n") else action.script + "\n"
        files[handler] = script
        shell["command"] = command
    else:
        assert action.command is not None
        shell["command"] = action.command
    shell["timeout_secs"] = action.timeout_secs
    if action.env:
        shell["env"] = dict(action.env)
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
    if spec.blocking is not None:
        doc.add("blocking", spec.blocking)
    if spec.skip_security_audit:
        doc.add("skip_security_audit", True)
    if spec.match:
        doc.add("match", _plain(spec.match))
    doc.add("action", {"shell": shell})
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
) -> WriteResult:
    """Write one hook into ``hooks_dir`` if the policy and the audit allow it.

    Order: policy gate, spec validation, build in memory, manifest validation, audit (with
    ``hooks_dir`` known, so a script that writes into it is caught), folder safety checks,
    then the atomic write. Any refusal returns ``ok=False`` with a ``code``, the reason and
    the findings, and leaves the disk untouched."""
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
        files = build_files(parsed)
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
    unsafe = _check_hooks_dir(root, parsed.name, replace=replace)
    if unsafe is not None:
        code, reason, findings = unsafe
        return _refuse(code, reason, name=parsed.name, findings=findings, bypasses=bypasses)
    try:
        replaced = _atomic_write(root, parsed.name, files, replace=replace)
    except _Refused as exc:
        return _refuse(exc.code, exc.reason, name=parsed.name, bypasses=bypasses)
    except OSError as exc:
        return _refuse(
            "io-error",
            f"could not write the hook into {root}: {exc.strerror or exc} "
            "(nothing was left behind)",
            name=parsed.name,
            bypasses=bypasses,
        )
    return WriteResult(
        ok=True,
        name=parsed.name,
        reason=("replaced" if replaced else "written") + " (not reloaded: run `hookbus reload`)",
        path=str(root / parsed.name),
        files=sorted(files),
        replaced=replaced,
        findings=report.findings,
        bypasses=bypasses,
    )


class _Refused(Exception):
    def __init__(self, code: RefusalCode, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


def _symlink_finding(file: str, message: str) -> Finding:
    return Finding("symlink", "critical", file, None, message)


def _check_hooks_dir(
    root: Path, name: str, *, replace: bool
) -> tuple[RefusalCode, str, list[Finding]] | None:
    """Refuse a hooks folder that is a symlink, holds one, or already has this hook."""
    try:
        st = root.lstat()
    except FileNotFoundError:
        return None  # created (component by component, no symlinks) by the write
    except OSError as exc:
        return ("io-error", f"cannot inspect the hooks folder {root}: {exc.strerror}", [])
    if stat.S_ISLNK(st.st_mode):
        return (
            "unsafe-path",
            f"the hooks folder {root} is a symlink; writes never follow symlinks "
            "(point hooks_dir at the real folder)",
            [_symlink_finding(str(root), "the hooks folder itself is a symlink")],
        )
    if not stat.S_ISDIR(st.st_mode):
        return ("unsafe-path", f"{root} is not a folder", [])
    links: list[Finding] = []
    try:
        with os.scandir(root) as entries:
            for entry in entries:
                if entry.is_symlink():
                    points_to = "?"
                    with contextlib.suppress(OSError):
                        points_to = os.readlink(entry.path)
                    links.append(
                        _symlink_finding(
                            entry.name,
                            f"a symlink in the hooks folder (to {points_to!r}): replace it with a "
                            "real folder before writing hooks here",
                        )
                    )
    except OSError as exc:
        return ("io-error", f"cannot list the hooks folder {root}: {exc.strerror}", [])
    if links:
        return (
            "unsafe-path",
            f"the hooks folder {root} holds {len(links)} symlink(s); nothing is written into a "
            "folder whose entries may lead elsewhere",
            links,
        )
    for other in (f"{name}.yaml", f"{name}.yml"):
        if os.path.lexists(root / other):
            return ("exists", f"a single-file hook {other} already exists; remove it first", [])
    target = root / name
    if os.path.lexists(target):
        if not replace:
            return (
                "exists",
                f"a hook named {name!r} already exists in {root}; pass --replace "
                "(replace=true) to overwrite it",
                [],
            )
        if not target.is_dir() or target.is_symlink():
            return ("unsafe-path", f"{target} is not a hook folder; refusing to replace it", [])
    return None


def _mkdirs_no_symlinks(root: Path) -> None:
    """Create ``root`` and missing parents, refusing any existing component that is a link."""
    missing: list[Path] = []
    current = root.absolute()
    while not os.path.lexists(current):
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for path in reversed(missing):
        os.mkdir(path, 0o755)
        if path.is_symlink():  # pragma: no cover - a race with another process
            raise _Refused("unsafe-path", f"{path} turned into a symlink while being created")


_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


def _write_file(dir_fd: int, name: str, text: str, mode: int) -> None:
    """Temp file + fsync + rename, relative to ``dir_fd``, never following a link."""
    tmp = f".{name}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW, mode, dir_fd=dir_fd)
    try:
        data = text.encode("utf-8")
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fchmod(fd, mode)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def _atomic_write(root: Path, name: str, files: dict[str, str], *, replace: bool) -> bool:
    """Stage the hook in a hidden temp folder inside ``root``, then rename it into place.
    Returns whether an existing hook was replaced."""
    _mkdirs_no_symlinks(root)
    if root.is_symlink():
        raise _Refused("unsafe-path", f"the hooks folder {root} is a symlink")
    _remove_stale_staging(root)
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=root))
    try:
        hook_dir = staging / name
        os.mkdir(hook_dir, 0o755)
        dir_fd = os.open(hook_dir, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW)
        try:
            for rel, text in sorted(files.items()):
                mode = 0o755 if rel.startswith("handler.") else 0o644
                _write_file(dir_fd, rel, text, mode)
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        target = root / name
        replaced = False
        if os.path.lexists(target):
            if not replace:
                raise _Refused("exists", f"a hook named {name!r} appeared in {root} meanwhile")
            if target.is_symlink() or not target.is_dir():
                raise _Refused("unsafe-path", f"{target} is not a hook folder")
            old = staging / f"{name}.old"
            os.rename(target, old)
            replaced = True
            try:
                os.rename(hook_dir, target)
            except OSError:
                os.rename(old, target)  # put the previous hook back before cleaning up
                raise
        else:
            os.rename(hook_dir, target)
        _fsync_dir(root)
        return replaced
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _remove_stale_staging(root: Path) -> None:
    """Staging folders left by a writer that died (older than :data:`STALE_STAGING_S`):
    the bundle would otherwise carry them."""
    now = time.time()
    with contextlib.suppress(OSError), os.scandir(root) as entries:
        for entry in entries:
            if not entry.name.startswith(STAGING_PREFIX) or not entry.is_dir(follow_symlinks=False):
                continue
            with contextlib.suppress(OSError):
                if now - entry.stat(follow_symlinks=False).st_mtime > STALE_STAGING_S:
                    shutil.rmtree(entry.path, ignore_errors=True)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY | _O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
