"""What the audit reports: a :class:`Finding` (rule, severity, file, line, message), the
:class:`AuditReport` of one audit, and the :class:`HookSource` one hook is audited from. The
:class:`~hookbus.audit.collector.Collector` that gathers one hook's findings (deduplicated,
capped per rule and file, each rule run guarded) is :mod:`hookbus.audit.collector`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hookbus.audit.autonomy import Bypass, Severity


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


#: Critical rules about a hook that its build refuses too (a header naming an undeclared
#: variable, an env name agents may not set, a regex the linear engine cannot run): a
#: worker leaves that hook out alone instead of refusing the whole set.
LEFT_OUT_AT_BUILD = frozenset({"http-header-env", "agent-env", "regex-engine"})


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
    def refusing_a_set(self) -> list[Finding]:
        """The critical findings a worker refuses a whole set for: those whose hook its
        build would not leave out by itself (see :data:`LEFT_OUT_AT_BUILD`)."""
        return [f for f in self.critical if f.rule not in LEFT_OUT_AT_BUILD]

    @property
    def ok(self) -> bool:
        return not self.critical

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


@dataclass
class HookSource:
    """One hook as the engine sees it: a manifest (raw) and the files of its folder."""

    name: str
    prefix: str  # display prefix of its files ("guard/" or "")
    manifest_file: str | None  # display path of the manifest
    manifest_text: str | None
    files: dict[str, bytes]  # relative path → content, handler candidates only
    local_names: frozenset[str]  # every regular file name in the folder (relative)
    #: agent-authored (parsed and refused when unresolvable); None: as the manifest's author says
    agent: bool | None = None
