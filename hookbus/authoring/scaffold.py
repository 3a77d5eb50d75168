"""Scaffolding of hooks (``hookbus hooks create``).

:func:`create_hook` writes a hook folder that validates by construction, with a handler stub
that runs and answers "continue". Editing an existing manifest (``enable`` / ``disable``) is
:mod:`hookbus.authoring.manifest_edit`.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from hookbus.bus.kinds import DEFAULT_CATALOGUE, Catalogue
from hookbus.errors import HookExists, ManifestError
from hookbus.hooks.actions.kinds import ACTION_KINDS
from hookbus.hooks.manifest import (
    TOML_FILENAME,
    load_manifest,
)

#: The action kinds ``hooks create`` can scaffold: those whose row has a scaffold.
SCAFFOLD_ACTIONS: tuple[str, ...] = tuple(
    name for name, kind in ACTION_KINDS.items() if kind.scaffold is not None
)

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")


def _toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def create_hook(
    hooks_dir: Path,
    name: str,
    event: str,
    *,
    action: str = "shell",
    priority: int = 100,
    description: str | None = None,
    catalogue: Catalogue = DEFAULT_CATALOGUE,
) -> Path:
    """Write ``hooks_dir/name/HOOK.toml`` and its handler; returns the manifest path."""
    if not _NAME_RE.match(name):
        raise ManifestError(
            str(hooks_dir / name),
            "name",
            "must be 1-64 letters, digits, '-', '_' or '.', starting with a letter or digit",
        )
    if action not in SCAFFOLD_ACTIONS:
        raise ManifestError(
            str(hooks_dir / name), "action", f"must be one of {', '.join(SCAFFOLD_ACTIONS)}"
        )
    kind = catalogue.canonical(event)
    folder = hooks_dir / name
    for existing in (folder, hooks_dir / f"{name}.yaml", hooks_dir / f"{name}.yml"):
        if existing.exists():
            raise HookExists(str(existing))
    text = description or f"{action} hook on {kind} (edit me)"
    lines = [
        f"# {name}: a hookbus hook. Fields: docs/hooks.md",
        f"name = {_toml_string(name)}",
        f"description = {_toml_string(text)}",
        'version = "0.1.0"',
        f"events = [{_toml_string(kind)}]",
        f"priority = {priority}  # lower runs first",
        "enabled = true",
        'on_error = "allow"  # what an error or a timeout decides: allow | deny',
        "",
        "# [match]            # run only for some events, e.g.",
        '# tools = ["Bash"]',
        "",
    ]
    scaffold = ACTION_KINDS[action].scaffold
    assert scaffold is not None
    lines += [f"[action.{action}]", *scaffold.toml]
    files = {file: text.format(name=name, event=kind) for file, text in scaffold.files.items()}
    folder.mkdir(parents=True)
    manifest = folder / TOML_FILENAME
    try:
        manifest.write_text("\n".join(lines) + "\n", encoding="utf-8")
        for filename, content in files.items():
            path = folder / filename
            path.write_text(content, encoding="utf-8")
            if filename.endswith(".sh"):
                path.chmod(0o755)
        load_manifest(manifest, catalogue=catalogue)  # validates by construction (--priority)
    except (ManifestError, OSError):
        shutil.rmtree(folder, ignore_errors=True)  # ours: leave no half-made hook behind
        raise
    return manifest
