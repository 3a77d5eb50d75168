"""Configuration: defaults < the user's ``hookbus.toml`` < a running ``hookbus dev`` < the
project's ``hookbus.toml`` < ``HOOKBUS_*`` environment < flags.

``discovery`` finds the files (one search for every entry point); ``table`` holds the names,
ranges and checks every reader shares (standard library only: the per-event hook reads
them); the schema (``schema``, ``sections``) is a tree of frozen msgspec Structs; ``env``
reads the environment; ``loader`` merges the layers and explains what is wrong. The names
below are the package's public surface, resolved on first use so that importing
``discovery`` or ``table`` loads no msgspec.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: the per-event path does not import typing
if TYPE_CHECKING:
    from hookbus.bus.settings.loader import (
        LoadedSettings,
        find_config_file,
        load_settings,
        mask_url,
    )
    from hookbus.bus.settings.schema import Settings
    from hookbus.bus.settings.table import CONFIG_FILENAME

__all__ = [
    "CONFIG_FILENAME",
    "LoadedSettings",
    "Settings",
    "find_config_file",
    "load_settings",
    "mask_url",
]

_LAZY = {
    "CONFIG_FILENAME": "hookbus.bus.settings.table",
    "LoadedSettings": "hookbus.bus.settings.loader",
    "Settings": "hookbus.bus.settings.schema",
    "find_config_file": "hookbus.bus.settings.loader",
    "load_settings": "hookbus.bus.settings.loader",
    "mask_url": "hookbus.bus.settings.loader",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hookbus.bus.settings' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
