"""Scaffolding and in-place edits of hook manifests (``hookbus hooks create|enable|disable``).

:func:`create_hook` writes a hook folder that validates by construction, with a handler stub
that runs and answers "continue". :func:`set_enabled` flips ``enabled`` in a manifest of any
form, keeping the author's comments and layout: TOML through ``tomlkit``, HOOK.md
frontmatter and YAML by editing the one line (or adding it).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Literal

from hookbus.bus.kinds import DEFAULT_CATALOGUE, Catalogue
from hookbus.errors import HookExists, HookNotFound, ManifestError
from hookbus.hooks.manifest import (
    MARKDOWN_FILENAME,
    TOML_FILENAME,
    YAML_SUFFIXES,
    HookManifest,
    load_manifest,
    split_frontmatter,
)

ScaffoldAction = Literal["shell", "python", "http", "prompt_inject"]
SCAFFOLD_ACTIONS: tuple[ScaffoldAction, ...] = ("shell", "python", "http", "prompt_inject")

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

_SHELL_STUB = """#!/bin/sh
# {name}: runs on {event}. The event arrives as JSON on stdin.
# Answer: exit 0 and print nothing (continue), exit 0 and print one JSON object
# (e.g. {{"outcome": "deny", "reason": "..."}}), or exit 2 with a reason on stderr (deny).
cat > /dev/null
exit 0
"""

_PYTHON_STUB = '''"""{name}: runs on {event}. See docs/hooks.md for what a hook may answer."""

from __future__ import annotations

from typing import Any


def handle(event: Any) -> dict[str, Any] | None:
    """Return None to continue, or a dict such as {{"outcome": "deny", "reason": "..."}}."""
    return None
'''


def _toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def create_hook(
    hooks_dir: Path,
    name: str,
    event: str,
    *,
    action: ScaffoldAction = "shell",
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
    files: dict[str, str] = {}
    if action == "shell":
        lines += ["[action.shell]", 'command = "./handler.sh"', "timeout_secs = 5"]
        files["handler.sh"] = _SHELL_STUB.format(name=name, event=kind)
    elif action == "python":
        lines += ["[action.python]", 'entrypoint = "handler:handle"', "timeout_secs = 5"]
        files["handler.py"] = _PYTHON_STUB.format(name=name, event=kind)
    elif action == "http":
        lines += [
            "[action.http]",
            'url = "http://127.0.0.1:8080/hook"  # receives the event as JSON',
            "timeout_secs = 5",
        ]
    else:
        lines += [
            "[action.prompt_inject]",
            'content = "Reminder: follow the project rules."',
            'position = "append"',
        ]
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
