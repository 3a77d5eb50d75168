"""The public API is ``hookbus.__all__``: pinned here, each name resolving to what it says,
cheap to import, and the only thing the docs and examples import."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import hookbus
import hookbus.errors

ROOT = Path(__file__).resolve().parents[2]

PUBLIC = {
    # the producer SDK
    "HookBus",
    "AsyncHookBus",
    "AgentSession",
    "AsyncAgentSession",
    # the wire vocabulary
    "Event",
    "Caller",
    "Decision",
    "HookResult",
    "HookRun",
    "HookSignal",
    # hooks as code
    "HookRegistry",
    "load_hooks",
    "LoadReport",
    # configuration
    "load_settings",
    "Settings",
    # what guards read commands with
    "simple_commands",
    # the errors a caller meets
    "HookBusError",
    "ConfigError",
    "EventTooLarge",
    "HookExecutionError",
    "HookRegistrationError",
    "HookTimeout",
    "InvalidPayload",
    "KindCannotBlock",
    "ManifestError",
    "NoWorkerAlive",
    "RedisCommandError",
    "RedisUnavailable",
    "RequestTimeout",
    "ToolDenied",
    "UnknownEventKind",
    "WireError",
    "__version__",
}


def test_all_is_the_declared_public_api_sorted() -> None:
    assert set(hookbus.__all__) == PUBLIC
    assert hookbus.__all__ == sorted(hookbus.__all__)


def test_every_exported_name_resolves_to_the_object_defined_where_it_lives() -> None:
    import importlib

    for name in hookbus.__all__:
        value = getattr(hookbus, name)
        if name == "__version__":
            assert isinstance(value, str) and value
            continue
        home = importlib.import_module(hookbus._home(name) or "")
        assert value is getattr(home, name), name


def test_every_exported_error_is_a_hookbus_error() -> None:
    errors = [n for n in hookbus.__all__ if n.endswith(("Error", "Timeout", "Denied"))]
    errors += ["EventTooLarge", "InvalidPayload", "KindCannotBlock", "NoWorkerAlive"]
    errors += ["UnknownEventKind"]
    for name in errors:
        assert issubclass(getattr(hookbus, name), hookbus.errors.HookBusError), name


def test_dir_lists_every_exported_name_before_it_is_used() -> None:
    assert set(hookbus.__all__) <= set(dir(hookbus))


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        hookbus.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("hookbus.NoSuchThing resolved")


def test_the_sdk_guard_and_config_names_import_nothing_heavy() -> None:
    code = (
        "import json, sys\n"
        "from hookbus import (AgentSession, Decision, Event, HookBus, Settings, load_settings,\n"
        "    simple_commands)\n"
        "import hookbus.errors\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=60
    )
    modules = set(json.loads(out.stdout.strip().splitlines()[-1]))
    heavy = {"typer", "rich", "rq", "pydantic", "redis"}
    assert sorted(m for m in modules if m.split(".")[0] in heavy) == []


#: ``from hookbus.x import ...`` or ``import hookbus.x`` in a code line.
_DEEP_IMPORT = re.compile(
    r"^\s*(?:from\s+(hookbus\.[\w.]+)\s+import|import\s+(hookbus\.[\w.]+))", re.M
)
#: Packages the docs name as public beside ``hookbus`` itself, each with its own page:
#: ``hookbus.state`` (what a hook reads of the fleet's shared state, docs/fleet-state.md);
#: the agent SDK integrations, each an optional extra ``hookbus`` cannot import
#: (docs/agent-sdks.md).
DOCUMENTED_PACKAGES = (
    "hookbus.state",
    "hookbus.integrations",
    "hookbus.integrations.claude_agent_sdk",
    "hookbus.integrations.openai_agents",
)


def _documents() -> list[Path]:
    docs = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
    examples = [p for p in sorted((ROOT / "examples").rglob("*")) if p.is_file()]
    return docs + [p for p in examples if p.suffix in (".py", ".md", ".sh", ".toml", ".yaml")]


def test_docs_and_examples_import_only_from_hookbus_itself() -> None:
    deep = [
        f"{path.relative_to(ROOT)}: {match.group(0).strip()}"
        for path in _documents()
        for match in _DEEP_IMPORT.finditer(path.read_text(encoding="utf-8"))
        if (match.group(1) or match.group(2)) not in DOCUMENTED_PACKAGES
    ]
    assert deep == [], "import these from hookbus (add to hookbus.__all__ what users need)"


def test_the_deep_import_check_sees_both_forms() -> None:
    text = (
        "from hookbus import Event\n"
        "    from hookbus.hooks.loader import load_hooks\n"
        "import hookbus.bus\n"
    )
    assert len(_DEEP_IMPORT.findall(text)) == 2
