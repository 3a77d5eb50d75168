"""Hook manifests in their three file forms, each rewritten into the TOML form's field names
and validated once by :class:`~hookbus.hooks.manifest_model.HookManifest`.

A hook is described by ``hooks/<name>/HOOK.toml`` (the primary form), by
``hooks/<name>/HOOK.md`` with YAML frontmatter (MicroClaw's form: ``name``, ``description``,
``events``, ``command``, ``timeout``, ``requires``), or by a single ``hooks/<name>.yaml``
(the single-file form: ``id``, ``event_type``, ``summary``, ``handler {kind, command}``...). Errors
are :class:`~hookbus.errors.ManifestError` naming the file, the field and the reason.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import yaml

from hookbus.bus.kinds import DEFAULT_CATALOGUE, Catalogue
from hookbus.errors import ManifestError
from hookbus.hooks.actions.raw import yaml_handler_action, yaml_handler_kinds
from hookbus.hooks.manifest_model import (
    MARKDOWN_FILENAME,
    TOML_FILENAME,
    YAML_SUFFIXES,
    HookManifest,
    manifest_from_data,
)

__all__ = [
    "MARKDOWN_FILENAME",
    "TOML_FILENAME",
    "YAML_SUFFIXES",
    "HookManifest",
    "load_manifest",
    "parse_markdown",
    "parse_toml",
    "parse_yaml",
    "split_frontmatter",
]


def _flatten_hook_table(data: dict[str, Any]) -> dict[str, Any]:
    """Accept the fields inside a ``[hook]`` table as well as at the top level."""
    hook = data.get("hook")
    if isinstance(hook, dict):
        rest = {k: v for k, v in data.items() if k != "hook"}
        return {**hook, **rest}
    return data


def parse_toml(
    text: str, path: Path, *, folder: Path | None = None, catalogue: Catalogue = DEFAULT_CATALOGUE
) -> HookManifest:
    """Parse a ``HOOK.toml``."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(str(path), None, f"not valid TOML: {exc}") from None
    data = _flatten_hook_table(data)
    if "conditions" in data and "match" not in data:
        data["match"] = data.pop("conditions")
    return manifest_from_data(
        data, path=path, folder=folder or path.parent, form="toml", catalogue=catalogue
    )


_FRONTMATTER_RE = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)


def split_frontmatter(text: str) -> tuple[str, str] | None:
    """``(frontmatter, body)`` of a Markdown file, or None when it has no frontmatter."""
    found = _FRONTMATTER_RE.match(text)
    if found is None:
        return None
    return found.group(1), text[found.end() :]


def _yaml_mapping(text: str, path: Path, what: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ManifestError(
            str(path), None, f"{what} is not valid YAML{where}: {problem}"
        ) from None
    if not isinstance(data, dict):
        raise ManifestError(str(path), None, f"{what} must be a YAML mapping of fields")
    return {str(k): v for k, v in data.items()}


def parse_markdown(
    text: str, path: Path, *, folder: Path | None = None, catalogue: Catalogue = DEFAULT_CATALOGUE
) -> HookManifest:
    """Parse a MicroClaw-style ``HOOK.md``: ``command`` / ``timeout`` become a shell action
    whose exit code 1 means deny (MicroClaw's contract) unless ``exit_codes`` says otherwise.
    The Markdown body is the description when the frontmatter has none."""
    parts = split_frontmatter(text)
    if parts is None:
        raise ManifestError(
            str(path), None, "no YAML frontmatter: start the file with '---', the fields, '---'"
        )
    front, body = parts
    data = _yaml_mapping(front, path, "the frontmatter")
    if "command" in data or "timeout" in data:
        if "action" in data:
            raise ManifestError(str(path), "command", "give either command or action, not both")
        shell: dict[str, Any] = {}
        if "command" in data:
            shell["command"] = data.pop("command")
        if "timeout" in data:
            shell["timeout_secs"] = data.pop("timeout")
        data["action"] = {"shell": shell}
        data.setdefault("exit_codes", {1: "deny"})
    if not data.get("description") and body.strip():
        data["description"] = body.strip().splitlines()[0].lstrip("# ").strip()
    return manifest_from_data(
        data, path=path, folder=folder or path.parent, form="markdown", catalogue=catalogue
    )


def parse_yaml(
    text: str, path: Path, *, folder: Path | None = None, catalogue: Catalogue = DEFAULT_CATALOGUE
) -> HookManifest:
    """Parse a single-file YAML hook (``hooks/<name>.yaml``)."""
    data = _yaml_mapping(text, path, "the file")
    renames = {"id": "name", "event_type": "events", "summary": "description"}
    for theirs, ours in renames.items():
        if theirs in data:
            if ours in data:
                raise ManifestError(str(path), theirs, f"give either {theirs} or {ours}, not both")
            data[ours] = data.pop(theirs)
    if isinstance(data.get("description"), str):
        data["description"] = " ".join(data["description"].split())
    if "handler" in data:
        if "action" in data:
            raise ManifestError(str(path), "handler", "give either handler or action, not both")
        data["action"] = _handler_to_action(data.pop("handler"), path)
    return manifest_from_data(
        data, path=path, folder=folder or path.parent, form="yaml", catalogue=catalogue
    )


def _handler_to_action(handler: Any, path: Path) -> dict[str, Any]:
    if not isinstance(handler, dict):
        raise ManifestError(str(path), "handler", "must be a mapping with kind and command")
    action = yaml_handler_action(handler)
    if action is None:
        kind = str(handler.get("kind", "script"))
        raise ManifestError(
            str(path), "handler.kind", f"unknown handler kind {kind!r}; use {yaml_handler_kinds()}"
        )
    return action


#: The largest manifest file read (a manifest is a few hundred bytes; anything this size
#: is a mistake or an attempt to slow every worker's reload).
MAX_MANIFEST_BYTES = 64 * 1024


def load_manifest(path: Path, *, catalogue: Catalogue = DEFAULT_CATALOGUE) -> HookManifest:
    """Read and parse one manifest file, choosing the form by its name."""
    try:
        if path.stat().st_size > MAX_MANIFEST_BYTES:
            raise ManifestError(
                str(path), None, f"larger than {MAX_MANIFEST_BYTES} bytes; keep manifests small"
            )
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ManifestError(str(path), None, f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ManifestError(str(path), None, "not UTF-8 text") from None
    if path.name == TOML_FILENAME:
        return parse_toml(text, path, catalogue=catalogue)
    if path.name == MARKDOWN_FILENAME:
        return parse_markdown(text, path, catalogue=catalogue)
    if path.suffix in YAML_SUFFIXES:
        return parse_yaml(text, path, catalogue=catalogue)
    raise ManifestError(
        str(path),
        None,
        f"not a hook manifest (expected {TOML_FILENAME}, {MARKDOWN_FILENAME} or <name>.yaml)",
    )
