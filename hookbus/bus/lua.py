"""The Lua scripts hookbus runs in Redis: package data, read from this one place.

Each subsystem keeps its scripts next to the module that sends them. Reading them here means
a script's text and its SHA-1 (the name EVALSHA calls it by) are found the same way by every
sender, once per process, and that helpers two scripts share are written once: a line that
is exactly ``--#include NAME`` is replaced by the text of ``NAME.lua`` in this package (Redis
runs each script alone, so a shared helper must travel inside every script that calls it).

``importlib.resources`` is imported on the first read, by workers, never on a producer's path.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import redis
    from redis.commands.core import Script

__all__ = ["LuaScript", "UnknownInclude", "register", "script", "source"]

#: What a line must be to take in a shared helper; the rest of the line names it.
INCLUDE = "--#include "


class UnknownInclude(ValueError):
    """A script asks for a helper that this package does not ship."""

    def __init__(self, script_name: str, helper: str) -> None:
        super().__init__(
            f"{script_name} includes {helper!r}, which is not a script of hookbus.bus: "
            f"add {helper}.lua next to hookbus/bus/lua.py or fix the --#include line"
        )


@dataclass(frozen=True, slots=True)
class LuaScript:
    """A script's text as Redis runs it (helpers included) and the SHA-1 Redis files it under."""

    name: str
    text: str
    sha: str


def _read(package: str, name: str) -> str:
    from importlib import resources

    return resources.files(package).joinpath(name).read_text("utf-8")


def _expand(name: str, text: str) -> str:
    lines = []
    for line in text.splitlines(keepends=True):
        if line.startswith(INCLUDE):
            helper = line[len(INCLUDE) :].strip()
            try:
                body = _read(__package__ or "hookbus.bus", f"{helper}.lua")
            except FileNotFoundError:
                raise UnknownInclude(name, helper) from None
            lines.append(body if body.endswith("\n") else body + "\n")
        else:
            lines.append(line)
    return "".join(lines)


@functools.cache
def script(package: str, name: str) -> LuaScript:
    """The script ``name`` (``lock.lua``) shipped in ``package`` (``hookbus.state``)."""
    text = _expand(f"{package}/{name}", _read(package, name))
    return LuaScript(f"{package}/{name}", text, hashlib.sha1(text.encode()).hexdigest())


def source(package: str, name: str) -> str:
    """The text of :func:`script`, for senders that EVAL or pack EVALSHA themselves."""
    return script(package, name).text


def register(client: redis.Redis, package: str, name: str) -> Script:
    """redis-py's ``Script`` for it on ``client``: EVALSHA, loading the text on NOSCRIPT."""
    return client.register_script(source(package, name))
