"""The autonomy policy: what an agent may do to hooks on its own, and what the audit enforces.

Derived from ``settings.autonomy`` and ``settings.security`` (see ``docs/security.md``):

- ``autonomy.level``: ``readonly`` (agents may look, never write or reload), ``supervised``
  (agents may write hooks, refused on any *high* or *critical* finding; the default) and
  ``full`` (agents may write hooks, refused only on *critical* findings).
- ``autonomy.allowed_commands`` (when set, a command's program must be one of them),
  ``autonomy.forbidden_paths``, ``autonomy.allow_hook_write``,
  ``autonomy.allow_shell_chaining``.
- ``security.skip_security_audit``: an operator's choice that bypasses every *autonomy* rule
  (and the write gate) but never the *confinement* rules (symlinks, escaping paths, hooks that
  write hooks, oversize or world-writable files, secrets). Every bypass is logged at WARNING
  and recorded as a :class:`Bypass` in the audit report and the write result.
- a manifest's own ``skip_security_audit = true`` counts only when
  ``security.allow_manifest_skip = true``; otherwise it is itself a finding.

The policy is a plain frozen value built once per command; it holds no global state.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings

logger = logging.getLogger(__name__)

Severity = Literal["critical", "high", "medium", "low"]
BypassSource = Literal["config", "manifest"]

#: Severities ordered from worst to mildest; an index compares two of them.
SEVERITIES: tuple[Severity, ...] = ("critical", "high", "medium", "low")


def severity_rank(severity: str) -> int:
    """0 for critical up to 3 for low (unknown severities rank as low)."""
    try:
        return SEVERITIES.index(severity)  # type: ignore[arg-type,unused-ignore]
    except ValueError:
        return len(SEVERITIES) - 1


@dataclass(frozen=True)
class Bypass:
    """One use of ``skip_security_audit``: who asked (config or the manifest), for which hook
    (``None`` for the write gate), and which findings it set aside."""

    source: BypassSource
    hook: str | None
    what: str
    suppressed: tuple[Any, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "hook": self.hook,
            "what": self.what,
            "suppressed": [
                f.to_dict() if hasattr(f, "to_dict") else str(f) for f in self.suppressed
            ],
        }

    def log(self) -> None:
        """Every bypass is logged, so an operator can find it after the fact."""
        logger.warning(
            "security bypass (%s skip_security_audit) for %s: %s; %d finding(s) set aside",
            self.source,
            self.hook or "hook writing",
            self.what,
            len(self.suppressed),
        )


@dataclass(frozen=True)
class Gate:
    """The answer of a policy gate: allowed or not, why, and the bypass that allowed it."""

    allowed: bool
    reason: str
    bypass: Bypass | None = None


@dataclass(frozen=True)
class AutonomyPolicy:
    """Everything the audit and self-authoring need from the configuration."""

    level: Literal["readonly", "supervised", "full"] = "supervised"
    allowed_commands: tuple[str, ...] = ()
    forbidden_paths: tuple[str, ...] = ("/etc", "/root", "~/.ssh", "~/.aws", "~/.gnupg")
    allow_hook_write: bool = True
    allow_shell_chaining: bool = False
    skip_security_audit: bool = False
    allow_manifest_skip: bool = False
    http_allowlist: tuple[str, ...] = ()
    allow_private_http: bool = False
    max_file_bytes: int = 1024 * 1024
    #: variables an agent's http hook headers may name (``security.http_header_env``)
    http_header_env: tuple[str, ...] = ()
    #: variables an agent's manifest env may set besides the defaults
    agent_env_allowlist: tuple[str, ...] = ()

    @classmethod
    def from_settings(cls, settings: Settings) -> AutonomyPolicy:
        """The policy the configuration asks for."""
        sec = settings.security
        auto = settings.autonomy
        return cls(
            level=auto.level,
            allowed_commands=tuple(auto.allowed_commands),
            forbidden_paths=tuple(auto.forbidden_paths),
            allow_hook_write=auto.allow_hook_write,
            allow_shell_chaining=auto.allow_shell_chaining,
            skip_security_audit=sec.skip_security_audit,
            allow_manifest_skip=sec.allow_manifest_skip,
            http_allowlist=tuple(sec.http_allowlist),
            allow_private_http=sec.allow_private_http,
            max_file_bytes=sec.max_file_bytes,
            http_header_env=tuple(sec.http_header_env),
            agent_env_allowlist=tuple(sec.agent_env_allowlist),
        )

    def write_gate(self) -> Gate:
        """May an agent write a hook at all? (before any content is looked at)"""
        if self.level != "readonly" and self.allow_hook_write:
            return Gate(True, f"autonomy.level is {self.level} and allow_hook_write is true")
        why = (
            "autonomy.level is readonly"
            if self.level == "readonly"
            else "autonomy.allow_hook_write is false"
        )
        if self.skip_security_audit:
            bypass = Bypass("config", None, f"hook writing allowed although {why}")
            bypass.log()
            return Gate(True, f"{why}, bypassed by security.skip_security_audit", bypass)
        return Gate(
            False,
            f"the autonomy policy forbids writing hooks: {why} "
            "(an operator may change autonomy.level / autonomy.allow_hook_write in hookbus.toml)",
        )

    def reload_gate(self) -> Gate:
        """May an agent publish the hooks folder to the fleet (``hooks_reload``)?"""
        if self.level != "readonly":
            return Gate(True, f"autonomy.level is {self.level}")
        if self.skip_security_audit:
            bypass = Bypass("config", None, "reload allowed although autonomy.level is readonly")
            bypass.log()
            return Gate(True, "readonly, bypassed by security.skip_security_audit", bypass)
        return Gate(
            False,
            "the autonomy policy forbids reloading hooks: autonomy.level is readonly "
            "(a person runs `hookbus reload`, or an operator raises autonomy.level)",
        )

    @property
    def write_block_rank(self) -> int:
        """Findings at or above this rank refuse a write: high under ``supervised``,
        critical only under ``full``."""
        return severity_rank("critical") if self.level == "full" else severity_rank("high")

    def blocks_write(self, severity: str) -> bool:
        """Does a finding of ``severity`` refuse a self-authored hook?"""
        return severity_rank(severity) <= self.write_block_rank
