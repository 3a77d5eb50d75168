"""hookbus: a Redis message bus that lets many AI agents share one fleet of lifecycle hooks.

The public API is what ``__all__`` lists, imported from ``hookbus`` itself:

* the producer SDK: :class:`HookBus`, :class:`AsyncHookBus`, and the agent-loop helpers
  :class:`AgentSession` / :class:`AsyncAgentSession`;
* the wire vocabulary: :class:`Event`, :class:`Caller`, :class:`Decision`,
  :class:`HookResult`, :class:`HookRun`, :class:`HookSignal`;
* hooks as code: :class:`HookRegistry`, and :func:`load_hooks` (with its
  :class:`LoadReport`) for a folder of hook manifests;
* configuration: :func:`load_settings` and :class:`Settings`;
* :func:`simple_commands`, the shell-command reader guards use;
* the errors a caller can meet, all :class:`HookBusError` subclasses.

Hooks that use the fleet's shared state import :mod:`hookbus.state` (docs/fleet-state.md).
Every other module under ``hookbus.`` is internal: its names may move between releases;
import them from here. ``tests/unit/test_exported_members.py`` pins this list.

Importing this package does nothing but define names: each is resolved on first use, so
``import hookbus`` costs no Redis, typer, rich, rq or pydantic import, and
``from hookbus import HookBus`` imports no redis-py until a client is built.
"""

from __future__ import annotations

# not typing.TYPE_CHECKING: the per-event hook process does not import typing
TYPE_CHECKING = False

__all__ = [
    "AgentSession",
    "AsyncAgentSession",
    "AsyncHookBus",
    "Caller",
    "ConfigError",
    "Decision",
    "Event",
    "EventTooLarge",
    "HookBus",
    "HookBusError",
    "HookExecutionError",
    "HookRegistrationError",
    "HookRegistry",
    "HookResult",
    "HookRun",
    "HookSignal",
    "HookTimeout",
    "InvalidPayload",
    "KindCannotBlock",
    "LoadReport",
    "ManifestError",
    "NoWorkerAlive",
    "RedisCommandError",
    "RedisUnavailable",
    "RequestTimeout",
    "Settings",
    "ToolDenied",
    "UnknownEventKind",
    "WireError",
    "__version__",
    "load_hooks",
    "load_settings",
    "simple_commands",
]

#: Where each public name is defined, imported from there on first use; the public names
#: not listed are errors, all defined in :mod:`hookbus.errors`.
_LAZY = {
    "AgentSession": "hookbus.producers.agent_session",
    "AsyncAgentSession": "hookbus.producers.agent_session",
    "AsyncHookBus": "hookbus.producers.async_client",
    "HookBus": "hookbus.producers.sync_client",
    "HookRegistry": "hookbus.hooks.registry",
    "LoadReport": "hookbus.hooks.loader",
    "load_hooks": "hookbus.hooks.loader",
    "Settings": "hookbus.bus.settings.schema",
    "load_settings": "hookbus.bus.settings.loader",
    "simple_commands": "hookbus.harnesses.commands",
    "Caller": "hookbus.bus.wire",
    "Decision": "hookbus.bus.wire",
    "Event": "hookbus.bus.wire",
    "HookResult": "hookbus.bus.wire",
    "HookRun": "hookbus.bus.wire",
    "HookSignal": "hookbus.bus.wire",
}

if TYPE_CHECKING:
    from typing import Any

    from hookbus.bus.settings.loader import load_settings
    from hookbus.bus.settings.schema import Settings
    from hookbus.bus.wire import Caller, Decision, Event, HookResult, HookRun, HookSignal
    from hookbus.errors import (
        ConfigError,
        EventTooLarge,
        HookBusError,
        HookExecutionError,
        HookRegistrationError,
        HookTimeout,
        InvalidPayload,
        KindCannotBlock,
        ManifestError,
        NoWorkerAlive,
        RedisCommandError,
        RedisUnavailable,
        RequestTimeout,
        ToolDenied,
        UnknownEventKind,
        WireError,
    )
    from hookbus.harnesses.commands import simple_commands
    from hookbus.hooks.loader import LoadReport, load_hooks
    from hookbus.hooks.registry import HookRegistry
    from hookbus.producers.agent_session import AgentSession, AsyncAgentSession
    from hookbus.producers.async_client import AsyncHookBus
    from hookbus.producers.sync_client import HookBus


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("hookbus")
        except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
            return "0.0.0"
    module_name = _home(name)
    if module_name is None:
        raise AttributeError(f"module 'hookbus' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def _home(name: str) -> str | None:
    """The module that defines public name ``name``; None for a name that is not public."""
    return _LAZY.get(name) or ("hookbus.errors" if name in __all__ else None)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
