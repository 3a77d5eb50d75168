"""The four MCP tools as plain methods, apart from the MCP transport that serves them.

:class:`HookTools` answers ``hooks_list``, ``hooks_audit``, ``hook_write`` and ``hooks_reload``
with ``(data, is_error)`` pairs: listing, auditing, writing under the autonomy policy and
releasing the folder. It lives here, not in :mod:`hookbus.authoring.mcp_server`, because it
needs no ``mcp`` package: tests call it directly, and the server module only wraps it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hookbus.audit.autonomy import AutonomyPolicy
from hookbus.audit.folder import audit_folder
from hookbus.authoring.pending import list_pending
from hookbus.authoring.release import hook_digest, record_change
from hookbus.authoring.write import NAME_RE, write_hook
from hookbus.bus.ids import agent_id_from, user_at_host
from hookbus.errors import BundleError, HookBusError, SecurityViolation

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings


def _who() -> str:
    """The agent an MCP client's writes are authored by: ``$HOOKBUS_AGENT_ID`` (the id its
    events carry, so its hooks act on its own sessions), else ``mcp:<user>@<host>``."""
    return agent_id_from(os.environ) or f"mcp:{user_at_host()}"


class HookTools:
    """The four tools as plain methods returning ``(data, is_error)``; the MCP layer only
    wraps them, so they are testable without a transport."""

    def __init__(self, settings: Settings, hooks_dir: Path) -> None:
        self.settings = settings
        self.hooks_dir = hooks_dir
        self.policy = AutonomyPolicy.from_settings(settings)

    def hooks_list(self) -> tuple[dict[str, Any], bool]:
        from hookbus.hooks.loader import load_hooks

        if not self.hooks_dir.is_dir():
            empty = {"hooks_dir": str(self.hooks_dir), "hooks": [], "pending": [], "problems": []}
            return empty, False
        report = load_hooks(self.hooks_dir, catalogue=self.settings.catalogue())
        audit = audit_folder(self.hooks_dir, settings=self.settings)
        bypasses = audit.bypasses_by_hook()
        hooks = []
        for m in report.hooks:
            findings = audit.for_hook(m.name) or audit.for_hook(m.folder.name)
            hooks.append(
                {
                    "name": m.name,
                    "description": m.description,
                    "events": list(m.events),
                    "priority": m.priority,
                    "enabled": m.enabled,
                    "blocking": m.blocking,
                    "action": m.action_kind,
                    "match": m.match.summary(),
                    "findings": [f"{f.severity} {f.rule}: {f.message}" for f in findings],
                    "bypasses": bypasses.get(m.name, []) or bypasses.get(m.folder.name, []),
                }
            )
        return {
            "hooks_dir": str(self.hooks_dir),
            "hooks": hooks,
            "pending": [{"name": p.name, "author": p.author} for p in list_pending(self.hooks_dir)],
            "problems": [str(p) for p in report.problems],
            "audit_ok": audit.ok,
        }, False

    def hooks_audit(self, name: str | None = None) -> tuple[dict[str, Any], bool]:
        target = self.hooks_dir
        if name:
            if not NAME_RE.match(name) and not (
                NAME_RE.match(name.removesuffix(".yaml").removesuffix(".yml"))
            ):
                return {"ok": False, "reason": f"{name!r} is not a hook name"}, True
            target = self.hooks_dir / name
            if not target.exists() and (self.hooks_dir / f"{name}.yaml").exists():
                target = self.hooks_dir / f"{name}.yaml"
            if not target.exists() and not target.is_symlink():
                return {"ok": False, "reason": f"no hook named {name!r} in {self.hooks_dir}"}, True
        data = audit_folder(target, settings=self.settings).to_dict()
        data["path"] = str(target)
        return data, False

    def hook_write(
        self, spec: dict[str, Any], *, replace: bool = False
    ) -> tuple[dict[str, Any], bool]:
        result = write_hook(
            spec, hooks_dir=self.hooks_dir, policy=self.policy, replace=replace, author=_who()
        )
        if result.ok and result.name and result.path:  # every write goes on the change history
            digest = hook_digest(Path(result.path))
            record_change(
                self.settings, action="write", actor=result.author, hook=result.name, sha256=digest
            )
        return result.to_dict(), not result.ok

    def hooks_reload(self) -> tuple[dict[str, Any], bool]:
        gate = self.policy.reload_gate()
        if not gate.allowed:
            return {"ok": False, "reason": gate.reason, "code": "policy"}, True
        try:
            from hookbus.authoring.release import release_folder
        except ImportError:
            return {
                "ok": False,
                "reason": "this installation has no bundle support (hookbus.bus.bundles); "
                "run `hookbus reload` instead",
            }, True
        from hookbus.bus.connection import connect

        try:
            client = connect(self.settings.effective_redis_url)
            result = release_folder(client, self.settings, self.hooks_dir, who=_who())
        except SecurityViolation as exc:
            return {
                "ok": False,
                "code": "audit",
                "reason": str(exc),
                "findings": [str(f) for f in exc.findings],
            }, True
        except BundleError as exc:
            return {"ok": False, "code": "bundle", "reason": str(exc)}, True
        except HookBusError as exc:
            return {"ok": False, "code": "error", "reason": str(exc)}, True
        data = {
            "ok": True,
            "version": result.version,
            "changed": result.changed,
            "previous": result.previous,
            "hooks": list(result.hooks),
            "problems": list(result.problems),
            "audit_findings": list(result.audit.findings),
        }
        if gate.bypass is not None:
            data["bypasses"] = [gate.bypass.to_dict()]
        return data, False
