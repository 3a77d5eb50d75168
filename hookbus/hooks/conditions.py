"""Conditions (``match``): compiled once into a plain predicate over an Event.

Every glob becomes one compiled regular expression when the hook is registered and the
``pattern`` regex is compiled once, so evaluating a match costs a few dictionary lookups
per event and never a compile. A hook whose conditions do not hold is not run.

Every regex a manifest carries (``match.pattern``, ``match.tool_input`` regexes) runs on
RE2 (``google-re2``), whose time is linear in the input: a pattern such as ``(a|aa)+$``
cannot hold a worker, whoever wrote it. RE2 has no backreferences or lookaround; a pattern
using them is refused when the manifest is read (:func:`linear_regex_error`).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgspec
import re2

from hookbus.bus.wire import Event

if TYPE_CHECKING:
    from hookbus.hooks.spec_models import MatchSpec

Predicate = Callable[[Event], bool]

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a refused pattern is an error returned, not a log line


def linear_search(pattern: str) -> Callable[[str], Any]:
    """``search`` of ``pattern`` compiled for RE2 (linear time); raises ValueError."""
    try:
        return re2.compile(pattern, _RE2_OPTIONS).search  # type: ignore[no-any-return]
    except re2.error as exc:
        raise ValueError(linear_regex_error(pattern) or str(exc)) from None


def linear_regex_error(pattern: str) -> str | None:
    """Why ``pattern`` cannot run on the linear-time engine, or None when it can."""
    try:
        re.compile(pattern)
    except re.error as exc:
        return f"not a valid regular expression: {exc}"
    try:
        re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as exc:
        detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        return (
            f"not a regular expression the linear-time engine (RE2) runs: {detail}; "
            "backreferences and lookaround are not supported, rewrite it without them"
        )
    return None


_json = msgspec.json.Encoder()


def _globs(patterns: Sequence[str]) -> Callable[[str], bool]:
    """One regex matching any of ``patterns`` (fnmatch syntax; ``*`` crosses ``/``)."""
    if any(p == "*" for p in patterns):
        return lambda _value: True
    regex = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))
    match = regex.match
    return lambda value: match(value) is not None


def _path(field: str) -> Callable[[Mapping[str, Any]], Any]:
    parts = tuple(field.split("."))
    if len(parts) == 1:
        key = parts[0]
        return lambda payload: payload.get(key)

    def get(payload: Mapping[str, Any]) -> Any:
        value: Any = payload
        for part in parts:
            if not isinstance(value, Mapping):
                return None
            value = value.get(part)
        return value

    return get


def _tool_name(event: Event) -> str | None:
    payload = event.payload
    name = payload.get("tool_name")
    if name is None:
        name = payload.get("ability_id")
    return name if isinstance(name, str) else None


def _tool_input_check(path: str, test: Any) -> Predicate:
    """``tool_input.<path>`` against a glob (a string), a value (a number or boolean) or a
    one-key table ``{equals | glob | regex = ...}``."""
    get = _path(path)
    if isinstance(test, Mapping):
        kind, target = next(iter(test.items()))
    elif isinstance(test, str):
        kind, target = "glob", test
    else:
        kind, target = "equals", test

    def value(event: Event) -> Any:
        tool_input = event.payload.get("tool_input")
        return get(tool_input) if isinstance(tool_input, Mapping) else None

    if kind == "equals":  # 1 equals 1.0, but True is not 1

        def equal(event: Event) -> bool:
            found = value(event)
            return found == target and isinstance(found, bool) == isinstance(target, bool)

        return equal
    if kind == "glob":
        ok = _globs([target])
        return lambda event: isinstance(found := value(event), str) and ok(found)
    search = linear_search(target)
    return lambda event: isinstance(found := value(event), str) and search(found) is not None


def compile_match(spec: MatchSpec | Mapping[str, Any] | None) -> Predicate | None:
    """A predicate for a :class:`~hookbus.hooks.manifest.MatchSpec` (or a dict with its
    fields); ``None`` when there is no condition, so the chain skips the call entirely."""
    if spec is None:
        return None
    if isinstance(spec, Mapping):
        from hookbus.hooks.spec_models import MatchSpec

        spec = MatchSpec.model_validate(dict(spec))
    checks: list[Predicate] = []

    def meta_glob(key: str, patterns: Sequence[str]) -> Predicate:
        ok = _globs(patterns)

        def check(event: Event) -> bool:
            value = event.meta.get(key)
            return isinstance(value, str) and ok(value)

        return check

    if spec.agents:
        ok_agent = _globs(spec.agents)
        checks.append(lambda e: e.agent_id is not None and ok_agent(e.agent_id))
    if spec.sessions:
        ok_session = _globs(spec.sessions)
        checks.append(lambda e: e.session_id is not None and ok_session(e.session_id))
    if spec.channels:
        checks.append(meta_glob("channel", spec.channels))
    if spec.users:
        checks.append(meta_glob("user", spec.users))
    tools = [*spec.tools, *spec.ability_scope]
    if tools and "*" not in tools:  # "*" selects every event, with or without a tool
        ok_tool = _globs(tools)

        def check_tool(event: Event) -> bool:
            name = _tool_name(event)
            return name is not None and ok_tool(name)

        checks.append(check_tool)
    if spec.callers:
        sources = frozenset(spec.callers)
        checks.append(lambda e: e.caller.source in sources)
    if spec.pattern is not None:
        search = linear_search(spec.pattern)
        if spec.field:
            get = _path(spec.field)

            def check_pattern(event: Event) -> bool:
                value = get(event.payload)
                if value is None:
                    return False
                if not isinstance(value, str):
                    value = _json.encode(value).decode()
                return search(value) is not None

        else:

            def check_pattern(event: Event) -> bool:
                return search(_json.encode(event.payload).decode()) is not None

        checks.append(check_pattern)
    if spec.min_duration_ms is not None:
        least = spec.min_duration_ms

        def check_duration(event: Event) -> bool:
            value = event.payload.get("duration_ms", 0)
            return isinstance(value, int | float) and value >= least

        checks.append(check_duration)
    if spec.only_if_changed_paths:
        ok_path = _globs(spec.only_if_changed_paths)

        def check_paths(event: Event) -> bool:
            files = event.payload.get("changed_files")
            if files is None:
                files = event.payload.get("changed_paths")
            if not isinstance(files, list):
                return False
            return any(isinstance(f, str) and ok_path(f) for f in files)

        checks.append(check_paths)
    for path, test in spec.tool_input.items():
        checks.append(_tool_input_check(path, test))
    if spec.tools_except:
        ok_listed = _globs(spec.tools_except)

        def check_unlisted(event: Event) -> bool:
            name = _tool_name(event)
            return name is not None and not ok_listed(name)

        checks.append(check_unlisted)
    if not checks:
        return None
    if len(checks) == 1:
        return checks[0]
    frozen = tuple(checks)
    return lambda event: all(check(event) for check in frozen)
