"""A manifest as raw data, for the audit: TOML, HOOK.md's YAML frontmatter or YAML parsed
without the pydantic model (a manifest that does not validate is still audited), then walked,
bounded in values and depth, for what the rules look at: commands, workdirs, handler
references, URLs, patterns, env and header values.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

#: At most this many values are looked at in one manifest (a YAML alias bomb stops here).
MAX_MANIFEST_NODES = 20_000
#: Deepest nesting looked at in one manifest.
MAX_MANIFEST_DEPTH = 64


def parse_manifest_text(filename: str, text: str) -> Any:
    """Raw data of a manifest: TOML, HOOK.md's YAML frontmatter, or YAML. Raises on bad syntax."""
    if filename.endswith(".toml"):
        data: Any = tomllib.loads(text)
        if isinstance(data, dict) and isinstance(data.get("hook"), dict) and "name" not in data:
            merged = dict(data["hook"])
            merged.update({k: v for k, v in data.items() if k != "hook"})
            data = merged
        return data
    if filename.endswith(".md"):
        lines = text.splitlines()
        if not lines or lines[0].strip() != "---":
            raise ValueError("HOOK.md must start with a '---' line opening its YAML frontmatter")
        try:
            end = next(i for i in range(1, len(lines)) if lines[i].strip() in ("---", "..."))
        except StopIteration:
            raise ValueError("HOOK.md's frontmatter has no closing '---' line") from None
        return yaml.safe_load("\n".join(lines[1:end]))
    return yaml.safe_load(text)


@dataclass
class Extracted:
    commands: list[tuple[str, Any]] = field(default_factory=list)
    workdirs: list[tuple[str, str]] = field(default_factory=list)
    handler_refs: list[tuple[str, str]] = field(default_factory=list)
    urls: list[tuple[str, str]] = field(default_factory=list)
    patterns: list[tuple[str, str]] = field(default_factory=list)
    env_items: list[tuple[str, str, str]] = field(default_factory=list)  # (path, key, value)
    header_items: list[tuple[str, str, str]] = field(default_factory=list)
    skip_requested: bool = False
    too_complex: bool = False


_COMMAND_KEYS = frozenset({"command", "cmd", "run", "exec"})
_WORKDIR_KEYS = frozenset({"workdir", "cwd", "working_dir", "working_directory"})
_HANDLER_KEYS = frozenset({"script", "handler", "handler_path", "module_path"})
_URL_KEYS = frozenset({"url", "endpoint", "webhook", "webhook_url", "callback_url"})
_ENV_KEYS = frozenset({"env", "environment"})
_HEADER_KEYS = frozenset({"headers"})


def extract_manifest(data: Any) -> Extracted:
    """Walk a raw manifest of any shape and pick out what the rules look at."""
    out = Extracted()
    if isinstance(data, Mapping) and data.get("skip_security_audit") in (True, "true", "yes", 1):
        out.skip_requested = True
    budget = [MAX_MANIFEST_NODES]
    stack: list[tuple[str, Any, int]] = [("", data, 0)]
    while stack:
        path, node, depth = stack.pop()
        budget[0] -= 1
        if budget[0] < 0 or depth > MAX_MANIFEST_DEPTH:
            out.too_complex = True
            return out
        if isinstance(node, Mapping):
            for raw_key, value in list(node.items())[:MAX_MANIFEST_NODES]:
                key = str(raw_key)
                lkey = key.lower()
                sub = f"{path}.{key}" if path else key
                if lkey in _COMMAND_KEYS and (
                    isinstance(value, str)
                    or (
                        isinstance(value, list)
                        and all(isinstance(v, str | int | float) for v in value)
                    )
                ):
                    out.commands.append(
                        (sub, [str(v) for v in value] if isinstance(value, list) else value)
                    )
                elif lkey in _WORKDIR_KEYS and isinstance(value, str):
                    out.workdirs.append((sub, value))
                elif lkey in _HANDLER_KEYS and isinstance(value, str):
                    out.handler_refs.append((sub, value))
                elif lkey == "entrypoint" and isinstance(value, str):
                    module = value.split(":", 1)[0]
                    if "/" in module or "\\" in module or module.startswith("."):
                        out.handler_refs.append((sub, module))
                elif lkey in _URL_KEYS and isinstance(value, str):
                    out.urls.append((sub, value))
                elif lkey == "pattern" and isinstance(value, str):
                    out.patterns.append((sub, value))
                elif lkey in _ENV_KEYS and isinstance(value, Mapping):
                    out.env_items.extend(
                        (f"{sub}.{k}", str(k), v) for k, v in value.items() if isinstance(v, str)
                    )
                elif lkey in _HEADER_KEYS and isinstance(value, Mapping):
                    out.header_items.extend(
                        (f"{sub}.{k}", str(k), v) for k, v in value.items() if isinstance(v, str)
                    )
                if isinstance(value, Mapping | list):
                    stack.append((sub, value, depth + 1))
        elif isinstance(node, list):
            for i, value in enumerate(node[:MAX_MANIFEST_NODES]):
                if isinstance(value, Mapping | list):
                    stack.append((f"{path}[{i}]", value, depth + 1))
    return out


def line_of(text: str | None, *needles: str) -> int | None:
    """First line of ``text`` containing the first line of one of ``needles``."""
    if not text:
        return None
    for needle in needles:
        probe = needle.strip().splitlines()[0] if needle.strip() else ""
        if not probe:
            continue
        probe = probe[:200]
        for i, line in enumerate(text.splitlines(), start=1):
            if probe in line:
                return i
    return None
