"""Reading a hook folder for the audit without trusting it: never following symlinks,
bounded in entries and bytes, flagging symlinks, special files, world-writable and oversize
files as it goes (these findings are the walk's, the content rules run later).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

from hookbus.audit.autonomy import AutonomyPolicy
from hookbus.audit.collector import Collector
from hookbus.audit.manifest_raw import extract_manifest, parse_manifest_text
from hookbus.audit.ruleset import MAX_ENTRIES_PER_HOOK
from hookbus.audit.shell.commands import command_tokens
from hookbus.bus.shipped import ships_dir, ships_file

_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def read_nofollow(path: str | Path, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of a regular file, refusing a symlink (``OSError``)."""
    fd = os.open(path, _READ_FLAGS)
    with os.fdopen(fd, "rb") as fh:
        return fh.read(limit + 1)


def flag_world_writable(collector: Collector, display: str) -> None:
    collector.add(
        "world-writable",
        "critical",
        display,
        None,
        f"writable by anyone on this machine: run `chmod o-w {display}`",
    )


def flag_too_large(collector: Collector, display: str, size: int, limit: int) -> None:
    collector.add(
        "file-too-large",
        "critical",
        display,
        None,
        f"{size} bytes, over security.max_file_bytes ({limit}): make it smaller or move "
        "data out of the hook folder",
    )


def left_out(entry: os.DirEntry[str]) -> bool:
    """Whether the bundle packer leaves ``entry`` out, and so the audit too: it never runs.
    Judged as the packer does, by name first (a link to a folder counts as a folder)."""
    try:
        is_dir = entry.is_dir()
    except OSError:
        is_dir = False
    return not (ships_dir(entry.name) if is_dir else ships_file(entry.name))


def walk(
    folder: Path, prefix: str, pol: AutonomyPolicy, collector: Collector
) -> tuple[dict[str, bytes], frozenset[str]]:
    """Every regular file of a hook folder (read, size-checked), never following symlinks."""
    files: dict[str, bytes] = {}
    names: set[str] = set()
    count = 0
    stack: list[tuple[Path, str]] = [(folder, "")]
    while stack:
        current, rel_dir = stack.pop()
        try:
            entries = sorted(os.scandir(current), key=lambda e: e.name)
        except OSError as exc:
            collector.add(
                "audit-internal",
                "high",
                f"{prefix}{rel_dir}",
                None,
                f"cannot list this folder ({exc.strerror}); fix its permissions",
            )
            continue
        for entry in entries:
            if left_out(entry):
                continue
            count += 1
            rel = f"{rel_dir}{entry.name}"
            display = f"{prefix}{rel}"
            if count > MAX_ENTRIES_PER_HOOK:
                collector.add(
                    "too-many-files",
                    "high",
                    f"{prefix}",
                    None,
                    f"more than {MAX_ENTRIES_PER_HOOK} entries in the hook folder: keep only what "
                    "the hook needs",
                )
                return files, frozenset(names)
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError as exc:
                collector.add(
                    "audit-internal", "high", display, None, f"cannot stat ({exc.strerror})"
                )
                continue
            if stat.S_ISLNK(st.st_mode):
                try:
                    target = os.readlink(entry.path)
                except OSError:
                    target = "?"
                collector.add(
                    "symlink",
                    "critical",
                    display,
                    None,
                    f"a symlink (to {target!r}): replace it with the real file; symlinks can "
                    "point outside the hook folder",
                )
                continue
            if st.st_mode & stat.S_IWOTH:
                flag_world_writable(collector, display)
            if stat.S_ISDIR(st.st_mode):
                stack.append((Path(entry.path), f"{rel}/"))
                continue
            if not stat.S_ISREG(st.st_mode):
                collector.add(
                    "special-file",
                    "critical",
                    display,
                    None,
                    "not a regular file (FIFO, socket or device): remove it",
                )
                continue
            names.add(rel)
            if st.st_size > pol.max_file_bytes:
                flag_too_large(collector, display, st.st_size, pol.max_file_bytes)
                continue
            try:
                files[rel] = read_nofollow(entry.path, pol.max_file_bytes)
            except OSError as exc:
                collector.add(
                    "audit-internal",
                    "high",
                    display,
                    None,
                    f"cannot read ({exc.strerror}); fix its permissions",
                )
    return files, frozenset(names)


def is_regular(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file(follow_symlinks=False)
    except OSError:
        return False


def referenced_siblings(
    text: str, display: str, folder: Path, local: set[str], pol: AutonomyPolicy
) -> dict[str, bytes]:
    """The files next to a single-file hook that its commands name (read without following "
    "links)."""
    out: dict[str, bytes] = {}
    try:
        commands = extract_manifest(parse_manifest_text(display, text)).commands
    except Exception:
        return out
    for _, command in commands:
        for tok in command_tokens(command):
            clean = tok[2:] if tok.startswith("./") else tok
            if clean not in local or clean in out:
                continue
            try:
                out[clean] = read_nofollow(folder / clean, pol.max_file_bytes)
            except OSError:
                continue
    return out


def iter_hook_entries(hooks_dir: Path) -> Iterator[os.DirEntry[str]]:
    """The entries of a hooks folder in name order (hidden ones included: symlinks count)."""
    try:
        entries = sorted(os.scandir(hooks_dir), key=lambda e: e.name)
    except OSError:
        return
    yield from entries
