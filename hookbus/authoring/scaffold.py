"""Scaffolding of hooks (``hookbus hooks create``).

:func:`create_hook` writes a hook folder that validates by construction, with a handler stub
that runs and answers "continue". Editing an existing manifest (``enable`` / ``disable``) is
:mod:`hookbus.authoring.manifest_edit`.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from hookbus import defaults
from hookbus.bus.kinds import DEFAULT_CATALOGUE, Catalogue, KindSpec
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

#: A scaffold's timeout, in seconds, when its event is no blocking request (or the
#: request's deadline is longer).
SCAFFOLD_TIMEOUT_S = 5.0
#: Share of a blocking request's deadline a scaffold's timeout takes: the rest is left for
#: the round trip and the hooks before it.
SCAFFOLD_DEADLINE_SHARE = 0.8

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")


def _toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def scaffold_timeout_s(spec: KindSpec, deadline_ms: Callable[[str], int]) -> float:
    """The timeout a new hook of ``spec``'s event gets: within the deadline of its blocking
    requests (``hooks validate`` warns about one past it), else :data:`SCAFFOLD_TIMEOUT_S`."""
    if not spec.blocking:
        return SCAFFOLD_TIMEOUT_S
    share_s = deadline_ms(spec.kind) * SCAFFOLD_DEADLINE_SHARE / 1000
    return min(SCAFFOLD_TIMEOUT_S, round(share_s, 3))


def create_hook(
    hooks_dir: Path,
    name: str,
    event: str,
    *,
    action: str = "shell",
    priority: int = 100,
    description: str | None = None,
    catalogue: Catalogue = DEFAULT_CATALOGUE,
    deadline_ms: Callable[[str], int] | None = None,
) -> Path:
    """Write ``hooks_dir/name/HOOK.toml`` and its handler; returns the manifest path.

    ``deadline_ms`` gives the deadline of a kind's blocking requests (the configuration's
    :meth:`~hookbus.bus.settings.loader.Settings.deadline_ms`; the default deadline when
    None): the scaffold's timeout stays within it, so the hook passes ``hooks validate``."""
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
    spec = catalogue.resolve(event)
    kind = spec.kind
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
        # a guard that errors must not let its call through: blocking kinds fail closed
        f'on_error = "{"deny" if spec.blocking else "allow"}"'
        "  # what an error or a timeout decides: allow | deny",
        "",
        "# [match]            # run only for some events, e.g.",
        '# tools = ["Bash"]',
        "",
    ]
    scaffold = ACTION_KINDS[action].scaffold
    assert scaffold is not None
    timeout = scaffold_timeout_s(spec, deadline_ms or (lambda _: defaults.DEFAULT_DEADLINE_MS))
    lines += [
        f"[action.{action}]",
        *(line.format(timeout=f"{timeout:g}") for line in scaffold.toml),
    ]
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
