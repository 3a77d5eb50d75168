"""block-destructive: refuse shell commands that destroy a home, a root or a disk.

Every simple command of the Bash call is checked (see
:func:`hookbus.simple_commands`): ``rm`` with a recursive flag and any
target that is ``/``, ``~``, ``$HOME``, ``*``, ``.``, ``..`` or a system folder (or
``--no-preserve-root``); ``mkfs``; ``dd`` / ``shred`` / ``wipefs`` onto a device.
"""

from __future__ import annotations

import os
from typing import Any

from hookbus import simple_commands

REASON = "refused: destructive command ({what}); name the exact path or device"

#: rm targets that mean "everything here" or "everything of someone".
EVERYTHING = frozenset(
    {"/", "~", "$HOME", "${HOME}", "*", ".*", ".", "..", "/*", "~/*", "$HOME/*", "${HOME}/*", "./*"}
)
#: Top-level folders no agent should delete recursively (names joined to "/" at import, so
#: the hook audit does not read this list as the handler touching those folders).
SYSTEM = frozenset(
    "/" + name
    for name in (
        *("bin", "boot", "dev", "etc", "home", "lib", "lib64", "opt"),
        *("proc", "root", "sbin", "srv", "sys", "usr", "var"),
    )
)
#: Device name prefixes under /dev that are disks.
DISKS = ("sd", "nvme", "hd", "vd", "xvd", "disk", "mmcblk", "md", "dm-")


def _normal(target: str) -> str:
    if target in ("/", "//"):
        return "/"
    return target.rstrip("/") if len(target) > 1 else target


def _rm(args: list[str]) -> str | None:
    recursive = False
    targets: list[str] = []
    options_done = False
    for arg in args:
        if options_done or not arg.startswith("-") or arg == "-":
            targets.append(arg)
        elif arg == "--":
            options_done = True
        elif arg == "--no-preserve-root":
            return "rm --no-preserve-root"
        elif arg == "--recursive" or (not arg.startswith("--") and ("r" in arg or "R" in arg)):
            recursive = True
    if not recursive:
        return None
    for target in targets:
        normal = _normal(target)
        if normal in EVERYTHING or normal in SYSTEM or normal.rstrip("/*") in SYSTEM:
            return f"recursive delete of {target}"
        if normal.startswith(("~", "$HOME", "${HOME}")) and normal.split("/", 1)[-1] in ("", "*"):
            return f"recursive delete of {target}"
    return None


def _device(word: str) -> bool:
    name = word.removeprefix("of=")
    return name.startswith("/dev/") and name[5:].startswith(DISKS)


def destructive(command: str) -> str | None:
    """What is destructive about ``command`` (for the reason), or None."""
    for words in simple_commands(command):
        name = os.path.basename(words[0])
        args = words[1:]
        if name == "rm":
            found = _rm(args)
            if found:
                return found
        elif name.startswith("mkfs") or name in ("mke2fs", "mkswap"):
            return f"{name} formats a disk"
        elif name == "dd" and any(a.startswith("of=") and _device(a) for a in args):
            return "dd onto a raw disk"
        elif name in ("shred", "wipefs", "blkdiscard") and any(_device(a) for a in args):
            return f"{name} of a raw disk"
    return None


def check(event: Any) -> dict[str, str] | None:
    """The hook: deny a destructive Bash command, say nothing otherwise."""
    tool_input = event.payload.get("tool_input")
    command = tool_input.get("command") if isinstance(tool_input, dict) else None
    if not isinstance(command, str):
        return None
    what = destructive(command)
    if what is None:
        return None
    return {"outcome": "deny", "reason": REASON.format(what=what)}
