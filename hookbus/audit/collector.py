"""Gathering one hook's findings while its rules run: the :class:`Collector`.

Rules report through a sink; the collector turns those calls into findings,
deduplicated and capped at ``MAX_FINDINGS_PER_RULE`` per rule and file (then one summary
line), and runs each rule guarded so that a rule that raises becomes a finding, never a
crashed audit. What a finding and a report are is :mod:`hookbus.audit.report`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from hookbus.audit.autonomy import Severity
from hookbus.audit.report import Finding
from hookbus.audit.textscan import MAX_FINDINGS_PER_RULE, Sink

logger = logging.getLogger(__name__)


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
