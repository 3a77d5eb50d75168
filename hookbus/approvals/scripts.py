"""The approval inbox's Lua scripts (package data), read once per process."""

from __future__ import annotations

from hookbus.bus import lua
from hookbus.bus.lua import LuaScript

#: The scripts, by name: park (chain workers), decide (operators), expire (sweepers).
NAMES = ("park", "decide", "expire")


def source(name: str) -> str:
    """The text of ``<name>.lua``."""
    return _script(name).text


def sha(name: str) -> str:
    """The SHA-1 Redis files ``<name>.lua`` under (for EVALSHA)."""
    return _script(name).sha


def _script(name: str) -> LuaScript:
    if name not in NAMES:
        raise ValueError(f"no approval script {name!r}")
    return lua.script("hookbus.approvals", f"{name}.lua")
