"""Configuration: defaults < ``hookbus.toml`` < ``HOOKBUS_*`` environment < flags.

The schema (``schema``, ``sections``) is a tree of frozen msgspec Structs; ``env`` reads the
environment; ``loader`` merges the layers and explains what is wrong. The names below are the
package's public surface.
"""

from hookbus.bus.settings.loader import (
    CONFIG_FILENAME,
    LoadedSettings,
    find_config_file,
    load_settings,
    mask_url,
)
from hookbus.bus.settings.schema import Settings

__all__ = [
    "CONFIG_FILENAME",
    "LoadedSettings",
    "Settings",
    "find_config_file",
    "load_settings",
    "mask_url",
]
