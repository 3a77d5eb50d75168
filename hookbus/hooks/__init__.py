"""Event catalogue, manifests, registry, conditions, actions, chain, audit, scaffolding.

``write_hook`` (agent self-authoring) and ``audit_folder`` are re-exported lazily, so that
importing this package for the catalogue costs nothing more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["audit_folder", "write_hook"]

if TYPE_CHECKING:
    from hookbus.hooks.audit import audit_folder
    from hookbus.hooks.write import write_hook

_LAZY = {"write_hook": "hookbus.hooks.write", "audit_folder": "hookbus.hooks.audit"}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'hookbus.hooks' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value
