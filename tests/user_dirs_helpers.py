"""The private user folders a test session runs in (tests/conftest.py sets them up).

A test run starts ``hookbus dev`` (a state file and the per-user pointer), workers (bundle
caches), installers (``~/.claude``, ``~/.gemini``, ``~/.codex``), Chromium, tmux and example
hooks that append to a file in the temp folder: every one writes under ``$HOME``, an XDG
folder or ``$TMPDIR``. The session gives them a private home instead
(:func:`private_environment`), while the tools the tests drive keep reading their own
configuration from the real home (:func:`tool_config_environment`: the registry npm uses, the
index pip uses, pyenv's root, git's identity), which they only read.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hookbus.bus.settings.discovery import POINTER_NAME, dev_alive, read_json

#: The variables that say where a user's files go; the session points each at its own folder.
USER_DIR_VARIABLES = (
    "HOME",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_RUNTIME_DIR",
    "TMUX_TMPDIR",
    "TMPDIR",
)
#: (variable, the file under the real home it names): configuration tools only read, kept
#: for the tests' subprocesses when the variable is unset and the file exists.
TOOL_CONFIG_FILES = (
    ("NPM_CONFIG_USERCONFIG", ".npmrc"),
    ("PIP_CONFIG_FILE", ".config/pip/pip.conf"),
    ("GIT_CONFIG_GLOBAL", ".gitconfig"),
    ("PYENV_ROOT", ".pyenv"),
)


def private_environment(base: Path, temp: Path) -> dict[str, str]:
    """The user-folder variables of a private home under ``base``, laid out as the XDG
    defaults are (``~/.config``, ``~/.cache``, ...), the folders made (0700), and ``temp``
    as ``$TMPDIR``."""
    home = base / "home"
    places = {
        "HOME": home,
        "XDG_CONFIG_HOME": home / ".config",
        "XDG_CACHE_HOME": home / ".cache",
        "XDG_DATA_HOME": home / ".local" / "share",
        "XDG_STATE_HOME": home / ".local" / "state",
        "XDG_RUNTIME_DIR": base / "run",
        "TMUX_TMPDIR": base / "tmux",
    }
    for folder in places.values():
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return {name: str(folder) for name, folder in places.items()} | {"TMPDIR": str(temp)}


def session_temp_dir() -> Path:
    """A fresh folder in the system temp folder, shared like it (sticky, anyone may write):
    the agent hooks of a worker that runs as root run as ``nobody``, and their sandbox
    folders are made in ``$TMPDIR``, which pytest's own temp folders (0700) would hide."""
    folder = Path(tempfile.mkdtemp(prefix="hookbus-tests-"))
    folder.chmod(0o1777)
    return folder


def remove_tree(folder: Path) -> None:
    """Remove ``folder``, read-only parts (cached bundles are 0555) included."""

    def writable_then_retry(func: Any, path: str, _exc: object) -> None:
        os.chmod(os.path.dirname(path), 0o700)
        if os.path.isdir(path) and not os.path.islink(path):
            os.chmod(path, 0o700)
        func(path)

    if sys.version_info >= (3, 12):
        shutil.rmtree(folder, onexc=writable_then_retry)
    else:  # onexc is new in 3.12; onerror warns there
        shutil.rmtree(folder, onerror=writable_then_retry)


def tool_config_environment(real_home: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """Variables that keep the real home's tool configuration visible under a private
    ``$HOME`` (each only where it is unset and the file or folder exists)."""
    found = {}
    for name, relative in TOOL_CONFIG_FILES:
        path = real_home / relative
        if not environ.get(name) and path.exists():
            found[name] = str(path)
    return found


def files_under(folder: Path) -> list[str]:
    """Every file, symlink or socket below ``folder``, relative to it, sorted."""
    found = []
    for parent, _dirs, names in os.walk(folder):
        found += [str((Path(parent) / name).relative_to(folder)) for name in names]
    return sorted(found)


def forget_stopped_devs(state_folder: Path) -> None:
    """Delete the state files of ``hookbus dev`` runs in ``state_folder`` that no longer
    run, and the per-user pointer when it names one of them (or nothing that exists)."""
    if not state_folder.is_dir():
        return
    for path in state_folder.glob("dev-*.json"):
        state = read_json(str(path))
        if state is None or not dev_alive(state):
            path.unlink(missing_ok=True)
    pointer = state_folder / POINTER_NAME
    named = read_json(str(pointer))
    target = named.get("state") if named else None
    if not isinstance(target, str) or not Path(target).exists():
        pointer.unlink(missing_ok=True)
