"""The approval inbox's Lua scripts (package data), read once per process."""

from __future__ import annotations

import functools
import hashlib

#: The scripts, by name: park (chain workers), decide (operators), expire (sweepers).
NAMES = ("park", "decide", "expire")


@functools.cache
def source(name: str) -> str:
    """The text of ``<name>.lua``."""
    if name not in NAMES:
        raise ValueError(f"no approval script {name!r}")
    from importlib import resources

    return resources.files("hookbus.approvals").joinpath(f"{name}.lua").read_text("utf-8")


@functools.cache
def sha(name: str) -> str:
    """The SHA-1 Redis files ``<name>.lua`` under (for EVALSHA)."""
    return hashlib.sha1(source(name).encode()).hexdigest()
