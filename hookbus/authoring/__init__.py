"""Agents writing hooks: ``write_hook``, scaffolding, and the MCP server that exposes them.

``write_hook`` is re-exported lazily so that importing this package costs nothing more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["write_hook"]

if TYPE_CHECKING:
    from hookbus.authoring.write import write_hook


def __getattr__(name: str) -> Any:
    if name != "write_hook":
        raise AttributeError(f"module 'hookbus.authoring' has no attribute {name!r}")
    from hookbus.authoring.write import write_hook

    globals()[name] = write_hook
    return write_hook
