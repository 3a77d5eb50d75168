"""The action-kind table read against raw manifest data, before any validation: the
``[action]`` a single-file YAML hook's ``handler`` stands for, the ``[action]`` of a hook
that is only its fleet-wide rules, and every field the audit must read, whatever its key.

The audit reads manifests that may not validate, so these work on plain mappings and skip
whatever is not one. The rows are :data:`hookbus.hooks.actions.kinds.ACTION_KINDS`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from hookbus.hooks.actions import kinds
from hookbus.hooks.actions.kinds import ActionKind, AuditTarget


def rules_only_action() -> dict[str, Any]:
    """The ``[action]`` of a manifest that is only its fleet-wide rules."""
    return {kind.name: {} for kind in kinds.ACTION_KINDS.values() if kind.rules_only}


def yaml_handler_action(handler: Mapping[str, Any]) -> dict[str, Any] | None:
    """A YAML single-file hook's ``handler`` (``kind``, default ``script``, and the action's
    fields; ``timeout`` for ``timeout_secs``) as ``[action]`` data; None for an unknown kind."""
    fields = dict(handler)
    name = str(fields.pop("kind", "script"))
    if "timeout" in fields:
        fields["timeout_secs"] = fields.pop("timeout")
    for kind in kinds.ACTION_KINDS.values():
        if name == kind.name or name in kind.yaml_names:
            for theirs, ours in kind.yaml_renames.items():
                if theirs in fields and ours not in fields:
                    fields[ours] = fields.pop(theirs)
            return {kind.name: fields}
    return None


def yaml_handler_kinds() -> str:
    """The ``handler.kind`` values a YAML hook may use, for an error message."""
    names = [
        kind.yaml_names[0] if kind.yaml_names else kind.name for kind in kinds.ACTION_KINDS.values()
    ]
    return ", ".join(names[:-1]) + f" or {names[-1]}"


def audit_targets(data: Any) -> Iterator[tuple[str, AuditTarget, Any]]:
    """Every field of a raw manifest's action that the table declares a command, path, URL,
    environment or headers: ``(path as the author wrote it, what it holds, its value)``.

    Reads raw data (a manifest that does not validate is still audited): ``[action.<kind>]``
    and a YAML hook's ``handler``; anything not a mapping is skipped.
    """
    if not isinstance(data, Mapping):
        return
    action = data.get("action")
    if isinstance(action, Mapping):
        for kind in kinds.ACTION_KINDS.values():
            section = action.get(kind.name)
            if isinstance(section, Mapping):
                yield from _declared(f"action.{kind.name}", kind, section, {})
    handler = data.get("handler")
    if isinstance(handler, Mapping):
        name = str(handler.get("kind", "script"))
        for kind in kinds.ACTION_KINDS.values():
            if name == kind.name or name in kind.yaml_names:
                renamed = {ours: theirs for theirs, ours in kind.yaml_renames.items()}
                yield from _declared("handler", kind, handler, renamed)


def _declared(
    prefix: str, kind: ActionKind, section: Mapping[Any, Any], renamed: Mapping[str, str]
) -> Iterator[tuple[str, AuditTarget, Any]]:
    for name, target in kind.audit_fields.items():
        for key in (name, renamed.get(name)):
            if key is not None and key in section:
                yield f"{prefix}.{key}", target, section[key]
