"""What ``hookbus hooks info`` / ``list --json`` show about a manifest: its data as JSON,
the handler it resolves to, its requirements in one line.
"""

from __future__ import annotations

from typing import Any

from hookbus.errors import HookBusError
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
    action = manifest.action
    if action.python is not None:
        module = action.python.entrypoint.partition(":")[0]
        local = manifest.folder / (module.replace(".", "/") + ".py")
        if local.is_file():
            return f"{local.resolve()}:{action.python.entrypoint.partition(':')[2]}"
        import importlib.util

        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            spec = None
        origin = spec.origin if spec is not None else f"{module} (not found)"
        return f"{origin}:{action.python.entrypoint.partition(':')[2]}"
    if action.shell is not None:
        from hookbus.hooks.actions.shell import ShellCall

        try:
            call = ShellCall.from_manifest(manifest, env_allowlist=env_allowlist)
        except HookBusError as exc:
            return f"(invalid: {exc})"
        return f"{call.describe()}  (in {call.cwd})"
    if action.http is not None:
        return f"{action.http.method} {action.http.url}"
    if action.prompt_inject is not None:
        return f"prompt_inject ({action.prompt_inject.position})"
    if action.wake is not None:
        wake = action.wake
        if wake.url is not None:
            return f"wake: POST {wake.url}"
        command = wake.command
        return f"wake: {command if isinstance(command, str) else ' '.join(command or [])}"
    return f"{action.kind} (not implemented by this version)"


def requires_text(manifest: HookManifest) -> str:
    req = manifest.requires
    parts = [
        f"{label}={','.join(values)}"
        for label, values in (("os", req.os), ("bins", req.bins), ("env", req.env))
        if values
    ]
    return " ".join(parts) or "-"
