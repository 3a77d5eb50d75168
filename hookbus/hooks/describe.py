"""What ``hookbus hooks info`` / ``list --json`` show about a manifest (its data as JSON, the
handler it resolves to, its fields in words), and the sample event ``hookbus hooks run``
reads.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from hookbus.bus.wire import Event
from hookbus.hooks.actions.kinds import action_kind
from hookbus.hooks.manifest_model import HookManifest


def manifest_dict(manifest: HookManifest) -> dict[str, Any]:
    data = manifest.model_dump(mode="json", exclude={"source_path", "folder"})
    data["source_path"] = str(manifest.source_path)
    data["folder"] = str(manifest.folder)
    data["action_kind"] = manifest.action.kind
    data["timeout_s"] = manifest.timeout_s
    data["match_summary"] = manifest.match.summary()
    return data


def handler_path(manifest: HookManifest, env_allowlist: tuple[str, ...]) -> str:
    """What the manifest's action runs, in words, without building it (``hooks info``)."""
    return action_kind(manifest).describe(manifest, env_allowlist)


def requires_text(manifest: HookManifest) -> str:
    req = manifest.requires
    parts = [
        f"{label}={','.join(values)}"
        for label, values in (("os", req.os), ("bins", req.bins), ("env", req.env))
        if values
    ]
    return " ".join(parts) or "-"


def info_rows(manifest: HookManifest, handler: str) -> list[tuple[str, str]]:
    """The rows of ``hookbus hooks info``: every field, in words."""
    return [
        ("name", manifest.name),
        ("description", manifest.description or "-"),
        ("version", manifest.version),
        ("file", f"{manifest.source_path} ({manifest.form})"),
        ("events", ", ".join(manifest.events)),
        ("priority", str(manifest.priority)),
        ("enabled", str(manifest.enabled).lower()),
        ("mode", manifest.mode),
        ("blocking", "default" if manifest.blocking is None else str(manifest.blocking).lower()),
        ("on_error", manifest.on_error),
        ("action", manifest.action.kind),
        ("handler", handler),
        ("timeout", f"{manifest.timeout_s:g}s"),
        ("match", manifest.match.summary()),
        ("modify.allow_keys", ", ".join(manifest.modify.allow_keys) or "-"),
        ("exit_codes", ", ".join(f"{k}={v}" for k, v in manifest.exit_codes.items()) or "-"),
        ("retries", f"{manifest.retries.count} {manifest.retries.intervals_s or ''}".strip()),
        (
            "batch",
            "-"
            if manifest.batch is None
            else f"{manifest.batch.max_events} events / {manifest.batch.max_wait_ms} ms",
        ),
        ("requires", requires_text(manifest)),
        (
            "effects",
            ", ".join(json.dumps(e) if not isinstance(e, str) else e for e in manifest.effects)
            or "-",
        ),
        ("skip_security_audit", str(manifest.skip_security_audit).lower()),
    ]


def event_from_json(text: str, default_kind: str) -> Event:
    """An Event from JSON text: hookbus's Event, Claude Code's hook input (``hook_event_name``
    and its fields), or a bare payload (then ``default_kind``). Raises ``ValueError`` with
    what is wrong, worded to follow "the event in <where>"."""
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise ValueError(f"is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError("must be a JSON object")
    if "kind" not in data:
        if "hook_event_name" in data:
            kind = str(data.pop("hook_event_name"))
            session = data.pop("session_id", None)
            data = {"kind": kind, "session_id": session, "payload": data}
        else:
            data = {"kind": default_kind, "payload": data}
    try:
        return msgspec.convert(data, Event)
    except msgspec.ValidationError as exc:
        raise ValueError(f"is not a valid event: {exc}") from None
