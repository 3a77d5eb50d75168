"""A manifest as raw data, for the audit: TOML, HOOK.md's YAML frontmatter or YAML parsed
without the pydantic model (a manifest that does not validate is still audited), then walked,
bounded in values and depth, for what the rules look at: commands, workdirs, handler
references, URLs, patterns, env and header values.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Iterator, Mapping
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
    #: every regex: ``match.pattern`` and ``match.tool_input.<path>.regex``
    patterns: list[tuple[str, str]] = field(default_factory=list)
    env_items: list[tuple[str, str, str]] = field(default_factory=list)  # (path, key, value)
    header_items: list[tuple[str, str, str]] = field(default_factory=list)
    #: the agents an agent's hook also acts on (set by an operator's approval)
    scope: list[tuple[str, str]] = field(default_factory=list)
    skip_requested: bool = False
    too_complex: bool = False


_Extractor = Callable[[Extracted, str, Any], None]


def _command(out: Extracted, path: str, value: Any) -> None:
    if isinstance(value, str):
        out.commands.append((path, value))
    elif isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        out.commands.append((path, [str(v) for v in value]))


def _strings(attr: str) -> _Extractor:
    """Append a string value to ``Extracted.<attr>`` as ``(path, value)``."""

    def extract(out: Extracted, path: str, value: Any) -> None:
        if isinstance(value, str):
            getattr(out, attr).append((path, value))

    return extract


def _entrypoint(out: Extracted, path: str, value: Any) -> None:
    if isinstance(value, str):
        module = value.split(":", 1)[0]
        if "/" in module or "\\" in module or module.startswith("."):
            out.handler_refs.append((path, module))


def _table(attr: str) -> _Extractor:
    """Append each scalar entry of a table to ``Extracted.<attr>`` as ``(path, key, value)``
    (numbers and booleans too: ``env = {LD_PRELOAD = 1}`` is read like any other)."""

    def extract(out: Extracted, path: str, value: Any) -> None:
        if isinstance(value, Mapping):
            getattr(out, attr).extend(
                (f"{path}.{k}", str(k), str(v))
                for k, v in value.items()
                if isinstance(v, str | int | float | bool)
            )

    return extract


def _scope(out: Extracted, path: str, value: Any) -> None:
    items = value if isinstance(value, list) else [value]
    out.scope.extend((path, str(item)) for item in items if isinstance(item, str | int))


#: What the audit reads under each key, wherever the key sits in the manifest (a new action
#: kind whose command sits under ``command`` is read without a change here).
KEY_EXTRACTORS: dict[str, _Extractor] = {
    **dict.fromkeys(("command", "cmd", "run", "exec"), _command),
    **dict.fromkeys(("workdir", "cwd", "working_dir", "working_directory"), _strings("workdirs")),
    **dict.fromkeys(("script", "handler", "handler_path", "module_path"), _strings("handler_refs")),
    "entrypoint": _entrypoint,
    **dict.fromkeys(
        ("url", "endpoint", "webhook", "webhook_url", "callback_url"), _strings("urls")
    ),
    **dict.fromkeys(("pattern", "regex"), _strings("patterns")),
    **dict.fromkeys(("env", "environment"), _table("env_items")),
    "headers": _table("header_items"),
    "scope": _scope,
}
#: Manifest fields that hold data the rules above need not read (names, numbers, switches,
#: prose): with :data:`KEY_EXTRACTORS`, every field of the manifest model is one or the other
#: (a test holds the two lists to the model).
DATA_FIELDS = frozenset(
    {
        "name",
        "description",
        "version",
        "events",
        "priority",
        "enabled",
        "blocking",
        "inline",
        "on_error",
        "match",
        "action",
        "modify",
        "requires",
        "effects",
        "skip_security_audit",
        "guard",
        "mode",
        "author",
        "exit_codes",
        "retries",
        "batch",
        "source_path",
        "folder",
        "form",
        "agents",
        "sessions",
        "channels",
        "users",
        "tools",
        "ability_scope",
        "callers",
        "field",
        "min_duration_ms",
        "only_if_changed_paths",
        "tool_input",
        "tools_except",
        "allow_keys",
        "os",
        "bins",
        "max_attempts",
        "count",
        "backoff_ms",
        "max_events",
        "max_wait_ms",
        "intervals_s",
        "isolate",
        # an approval's rules: how many operators, which, and whom to tell
        "approvers",
        "operators",
        "notify",
        "forbid_requester",
        # a judge hook's model and what it is told and shown: prose and numbers; its
        # endpoint is read as a URL, its key's variable is checked when it is built
        "llm",
        "model",
        "instructions",
        "input",
        "api_key_env",
        "cache_ttl",
        "max_concurrency",
        "max_rate",
        "max_tokens",
        "json_schema",
        "shell",
        "allow_workdir_outside",
        "timeout_secs",
        "max_output_bytes",
        "method",
        "max_response_bytes",
        "content",
        "position",
        "python",
        "http",
        "prompt_inject",
        "wake",
        "target",
        "session",
        "tmux_session",
        "agent_id",
        "message",
        # who answers an ask ([approval]): a route name and a wait in seconds
        "approval",
        "route",
        "wait_s",
        # fleet-wide state rules ([limit], [lock], [escalate]): names, counts and outcomes
        "limit",
        "lock",
        "escalate",
        "key",
        "max",
        "per",
        "within",
        "ttl",
        "release_on",
        "after",
        "then",
        "none",
        "of",
        "outcome",
    }
)


def _entries(data: Any, out: Extracted) -> Iterator[tuple[str, str, Any]]:
    """Every (path, key, value) of every table in ``data``, within the node and depth
    budget (past it ``out.too_complex`` is set and the walk stops)."""
    budget = MAX_MANIFEST_NODES
    stack: list[tuple[str, Any, int]] = [("", data, 0)]
    while stack:
        path, node, depth = stack.pop()
        budget -= 1
        if budget < 0 or depth > MAX_MANIFEST_DEPTH:
            out.too_complex = True
            return
        children: list[tuple[str, Any]] = []
        if isinstance(node, Mapping):
            for raw_key, value in list(node.items())[:MAX_MANIFEST_NODES]:
                key = str(raw_key)
                sub = f"{path}.{key}" if path else key
                yield sub, key.lower(), value
                children.append((sub, value))
        elif isinstance(node, list):
            children = [(f"{path}[{i}]", v) for i, v in enumerate(node[:MAX_MANIFEST_NODES])]
        stack.extend(
            (sub, value, depth + 1) for sub, value in children if isinstance(value, Mapping | list)
        )


def extract_manifest(data: Any) -> Extracted:
    """Walk a raw manifest of any shape and pick out what the rules look at."""
    out = Extracted()
    if isinstance(data, Mapping) and data.get("skip_security_audit") in (True, "true", "yes", 1):
        out.skip_requested = True
    for path, key, value in _entries(data, out):
        extractor = KEY_EXTRACTORS.get(key)
        if extractor is not None:
            extractor(out, path, value)
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
