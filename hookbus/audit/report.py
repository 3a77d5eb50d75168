"""What the audit reports: a :class:`Finding` (rule, severity, file, line, message), the
:class:`AuditReport` of one audit, and the :class:`Collector` that gathers one hook's findings
(deduplicated, capped per rule and file, each rule run guarded so the audit never crashes).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hookbus.audit.autonomy import Bypass, Severity
from hookbus.audit.textscan import MAX_FINDINGS_PER_RULE, Sink

logger = logging.getLogger(__name__)


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
        if count > MAX_FINDINGS_PER_RULE:
            if count == MAX_FINDINGS_PER_RULE + 1:
                self._append(
                    rule,
                    severity,
                    file,
                    None,
                    f"more {rule} findings in this file (only the first "
                    f"{MAX_FINDINGS_PER_RULE} are listed)",
                )
            return
        self._seen.add(key)
        self._append(rule, severity, file, line, message)

    def _append(self, rule: str, severity: str, file: str, line: int | None, message: str) -> None:
        sev: Severity = severity if severity in ("critical", "high", "medium", "low") else "high"  # type: ignore[assignment]
        self.findings.append(Finding(rule, sev, file, line, message, self.hook))

    def sink(self, file: str, line_offset: int = 0, fixed_line: int | None = None) -> Sink:
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
