"""Who owns which hook: an agent may replace (and so disable or re-prioritise) only a hook it
wrote, and may never take a name another author's hook already answers to (two manifests of
one name: the loader keeps the first in folder order, so the newcomer could shadow a guard).

Authors come from the manifests themselves (``author = "agent:<id>"``); a manifest that names
no author, or cannot be read, is an operator's. Pending hooks (``.pending/``) count too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hookbus.audit.manifest_raw import parse_manifest_text
from hookbus.authoring.pending import pending_dir
from hookbus.hooks.manifest_model import (
    MARKDOWN_FILENAME,
    OPERATOR,
    TOML_FILENAME,
    YAML_SUFFIXES,
)


@dataclass(frozen=True)
class OwnedHook:
    """A hook on disk: the name it answers to, its author, where it is, whether pending."""

    name: str
    author: str
    path: Path
    pending: bool


def _raw(path: Path) -> Any:
    try:
        return parse_manifest_text(path.name, path.read_text(encoding="utf-8"))
    except Exception:  # unreadable or broken: its author is unknown, so protected
        return None


def _owned(path: Path, manifest: Path, default_name: str, pending: bool) -> OwnedHook:
    data = _raw(manifest)
    data = data if isinstance(data, dict) else {}
    name = data.get("name", data.get("id", default_name))
    author = data.get("author", OPERATOR)
    return OwnedHook(
        name if isinstance(name, str) else default_name,
        author if isinstance(author, str) else OPERATOR,
        path,
        pending,
    )


def _scan(folder: Path, pending: bool) -> list[OwnedHook]:
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return []
    out: list[OwnedHook] = []
    for entry in entries:
        if entry.name.startswith("."):
            continue
        path = Path(entry.path)
        if entry.is_dir(follow_symlinks=False):
            for manifest_name in (TOML_FILENAME, MARKDOWN_FILENAME):
                if (path / manifest_name).is_file():
                    out.append(_owned(path, path / manifest_name, entry.name, pending))
                    break
        elif entry.is_file(follow_symlinks=False) and entry.name.endswith(YAML_SUFFIXES):
            out.append(_owned(path, path, path.stem, pending))
    return out


def owned_hooks(hooks_dir: Path | str) -> list[OwnedHook]:
    """Every hook of ``hooks_dir``, approved and pending."""
    return _scan(Path(hooks_dir), False) + _scan(pending_dir(hooks_dir), True)


def ownership_problem(hooks_dir: Path | str, name: str, author: str) -> str | None:
    """Why ``author`` may not write a hook called ``name`` here, or ``None``."""
    for hook in owned_hooks(hooks_dir):
        folder_name = hook.path.stem if hook.path.is_file() else hook.path.name
        if name not in (hook.name, folder_name) or hook.author == author:
            continue
        where = f"{'pending ' if hook.pending else ''}hook {hook.name!r} ({hook.path})"
        return (
            f"the {where} was written by {hook.author}: an agent may only replace, disable or "
            "re-prioritise a hook it wrote, and never take another hook's name; choose another "
            "name"
        )
    return None
