"""In-place edits of hook manifests (``hookbus hooks enable|disable``), and finding one.

:func:`set_enabled` flips ``enabled`` in a manifest of any form, keeping the author's
comments and layout: TOML through ``tomlkit``, HOOK.md frontmatter and YAML by editing the
one line (or adding it); the edit is re-parsed before it is written, so a broken manifest is
never left behind. :func:`find_manifest` finds a hook's manifest by name. Creating a hook is
:mod:`hookbus.authoring.scaffold`.
"""

from __future__ import annotations

import re
from pathlib import Path

from hookbus.bus.kinds import DEFAULT_CATALOGUE, Catalogue
from hookbus.errors import HookNotFound, ManifestError
from hookbus.hooks.manifest import (
    MARKDOWN_FILENAME,
    TOML_FILENAME,
    YAML_SUFFIXES,
    HookManifest,
    load_manifest,
    split_frontmatter,
)


def find_manifest(hooks_dir: Path, name: str, *, catalogue: Catalogue = DEFAULT_CATALOGUE) -> Path:
    """The manifest file of the hook called ``name`` (by folder / file name first, then by
    the ``name`` inside every manifest)."""
    candidates = [
        hooks_dir / name / TOML_FILENAME,
        hooks_dir / name / MARKDOWN_FILENAME,
        *(hooks_dir / f"{name}{suffix}" for suffix in YAML_SUFFIXES),
    ]
    for path in candidates:
        if path.is_file():
            return path
    if hooks_dir.is_dir():
        for path in (
            sorted(hooks_dir.glob("*/" + TOML_FILENAME))
            + sorted(hooks_dir.glob("*/" + MARKDOWN_FILENAME))
            + sorted(p for s in YAML_SUFFIXES for p in hooks_dir.glob("*" + s))
        ):
            try:
                if load_manifest(path, catalogue=catalogue).name == name:
                    return path
            except ManifestError:
                continue
    raise HookNotFound(name, str(hooks_dir))


_LINE_RE = re.compile(r"^enabled[ \t]*:[ \t]*[^\n#]*?([ \t]*#[^\n]*)?$", re.MULTILINE)


def _set_yaml_line(text: str, enabled: bool) -> str:
    value = "true" if enabled else "false"
    if _LINE_RE.search(text):
        return _LINE_RE.sub(lambda m: f"enabled: {value}{m.group(1) or ''}", text, count=1)
    body = text if text.endswith("\n") or not text else text + "\n"
    return body + f"enabled: {value}\n"


def set_enabled(
    path: Path, enabled: bool, *, catalogue: Catalogue = DEFAULT_CATALOGUE
) -> HookManifest:
    """Flip ``enabled`` in the manifest at ``path``, keeping comments and layout; returns the
    re-parsed manifest (so a broken edit is never left silently)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ManifestError(str(path), None, "not UTF-8 text") from exc
    if path.name == TOML_FILENAME:
        import tomlkit
        from tomlkit.exceptions import ParseError

        try:
            document = tomlkit.parse(text)
        except ParseError as exc:
            raise ManifestError(str(path), None, f"not valid TOML: {exc}") from exc
        hook_table = document.get("hook")
        target = hook_table if isinstance(hook_table, dict) and "name" in hook_table else document
        target["enabled"] = enabled
        new_text = tomlkit.dumps(document)
    elif path.name == MARKDOWN_FILENAME:
        parts = split_frontmatter(text)
        if parts is None:
            raise ManifestError(str(path), None, "no YAML frontmatter to edit")
        front, _body = parts
        start = text.index(front)
        new_front = _set_yaml_line(front, enabled).rstrip("\n")
        new_text = text[:start] + new_front + text[start + len(front) :]
    else:
        new_text = _set_yaml_line(text, enabled)
    manifest = load_manifest_text(path, new_text, catalogue)
    path.write_text(new_text, encoding="utf-8")
    return manifest


def load_manifest_text(path: Path, text: str, catalogue: Catalogue) -> HookManifest:
    """Parse ``text`` as if it were the content of ``path`` (without writing it)."""
    from hookbus.hooks.manifest import parse_markdown, parse_toml, parse_yaml

    if path.name == TOML_FILENAME:
        return parse_toml(text, path, catalogue=catalogue)
    if path.name == MARKDOWN_FILENAME:
        return parse_markdown(text, path, catalogue=catalogue)
    return parse_yaml(text, path, catalogue=catalogue)
