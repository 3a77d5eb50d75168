"""block-destructive: refuse shell commands that destroy a home, a root or a disk.

Every simple command of the Bash call is checked (see
:func:`hookbus.simple_commands`): ``rm`` with a recursive flag and any
target that is ``/``, ``~``, ``$HOME``, ``*``, ``.``, ``..`` or a system folder (or
``--no-preserve-root``); ``mkfs``; ``dd`` / ``shred`` / ``wipefs`` onto a device.
The command is read in whatever shape it arrives (a string, an argv list, ``tool_input``
itself a string); a NUL byte, or a command it cannot read, is refused.
"""

from __future__ import annotations

import json
import os
import shlex
from typing import Any

from hookbus import simple_commands

REASON = "refused: destructive command ({what}); name the exact path or device"
#: What :func:`command_line` answers for a command it cannot read.
UNREADABLE = "\x00unreadable"

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
#: The shell parser is loaded with the hook, not by its first call (a cold import of it
#: takes most of the 0.2 s a call may use on a busy host).
simple_commands("true")
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


def command_line(tool_input: Any) -> str | None:
    """The command line a Bash call runs, whatever shape it came in: ``{"command": ...}``
    with a string or an argv list (joined as a shell would read it), ``tool_input`` itself a
    string (a command, or the JSON text of the object). None when there is no command;
    :data:`UNREADABLE` when there is one this guard cannot read (refused: a guard that
    cannot see the command must not let it through)."""
    if isinstance(tool_input, str):
        try:
            decoded = json.loads(tool_input)
        except ValueError:
            return tool_input
        return command_line(decoded) if isinstance(decoded, dict) else tool_input
    command = tool_input.get("command") if isinstance(tool_input, dict) else None
    if command is None or isinstance(command, str):
        return command
    if isinstance(command, list) and all(isinstance(word, str) for word in command):
        return shlex.join(command)
    return UNREADABLE


def check(event: Any) -> dict[str, str] | None:
    """The hook: deny a destructive Bash command, say nothing otherwise."""
    command = command_line(event.payload.get("tool_input"))
    if command is None:
        return None
    if command is UNREADABLE:
        return {"outcome": "deny", "reason": REASON.format(what="a command it cannot read")}
    if "\x00" in command:
        # a shell reads its command as a C string, up to the NUL: what runs is not what a
        # parser of the whole text sees, so a NUL is refused outright
        return {"outcome": "deny", "reason": REASON.format(what="a NUL byte in the command")}
    what = destructive(command)
    if what is None:
        return None
    return {"outcome": "deny", "reason": REASON.format(what=what)}
