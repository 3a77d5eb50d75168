"""hookbus: a Redis message bus that lets many AI agents share one fleet of lifecycle hooks.

Importing this package does nothing but define names: the public API below is resolved
lazily, so ``import hookbus`` costs no Redis, typer, rich, rq or pydantic import, and
``from hookbus import HookBus`` imports no redis-py until a client is built.
"""

from __future__ import annotations

# not typing.TYPE_CHECKING: importing typing costs every per-event hook process ~2 ms
TYPE_CHECKING = False

__all__ = [
    "AsyncHookBus",
    "Caller",
    "Decision",
    "Event",
    "HookBus",
    "HookBusError",
    "HookRegistry",
    "HookResult",
    "HookRun",
    "HookSignal",
    "__version__",
]

_LAZY = {
    "AsyncHookBus": "hookbus.producers.async_client",
    "HookBus": "hookbus.producers.sync_client",
    "HookRegistry": "hookbus.hooks.registry",
    "Caller": "hookbus.bus.wire",
    "Decision": "hookbus.bus.wire",
    "Event": "hookbus.bus.wire",
    "HookResult": "hookbus.bus.wire",
    "HookRun": "hookbus.bus.wire",
    "HookSignal": "hookbus.bus.wire",
    "HookBusError": "hookbus.errors",
}

if TYPE_CHECKING:
    from typing import Any

    from hookbus.bus.wire import Caller, Decision, Event, HookResult, HookRun, HookSignal
    from hookbus.errors import HookBusError
    from hookbus.hooks.registry import HookRegistry
    from hookbus.producers.async_client import AsyncHookBus
    from hookbus.producers.sync_client import HookBus


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("hookbus")
        except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
            return "0.0.0"
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'hookbus' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value
