"""Where a running ``hookbus dev`` is, so other commands find it without being told.

``hookbus dev`` starts an embedded server on a port of its own choosing; every other shell,
the SDK and every agent-CLI hook must find it without an exported URL (which would go stale
at the next start). So ``dev`` writes a small JSON state file (Redis URL, namespace, hooks
folder, its pid) and removes it on exit, and points a per-user pointer at it:

- ``$XDG_RUNTIME_DIR/hookbus/`` (else ``$XDG_CACHE_HOME/hookbus/``, else
  ``~/.cache/hookbus/``) holds one state file per folder ``dev`` was started in
  (``dev-<name>-<hash of the path>.json``), so two projects never see each other's server
  from their own folders;
- ``current.json`` there names the state file of the last ``dev`` started: a Claude Code
  session started in any folder of the machine (it runs its hooks in the project's folder)
  still finds the running dev. When that dev stops, the pointer moves to another live one,
  or stays on the stopped dev's file, which says it stopped: the commands that used it
  refuse to fall through to another Redis (:func:`discovery.stopped_dev_problem`).

How the files are found, and where the dev's values rank among the other sources, is
:mod:`hookbus.bus.settings.discovery`. A state whose pid is gone is ignored everywhere.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from hookbus.bus.settings import discovery

TYPE_CHECKING = False  # typing costs the lean commands a few ms
if TYPE_CHECKING:
    from typing import Any

STATE_ENV = discovery.STATE_ENV
PROVIDED = discovery.DEV_PROVIDES


def state_dir() -> Path:
    return Path(discovery.state_dir())


def state_path(folder: Path | None = None) -> Path:
    """The state file of a ``hookbus dev`` started in ``folder`` (default: the cwd)."""
    return Path(discovery.state_path(str(folder) if folder else None))


def write_state(*, redis_url: str, namespace: str, hooks_dir: Path | None) -> Path:
    """Record this ``hookbus dev`` and point the per-user pointer at it (both private to
    the user: the URL may carry a password)."""
    path = state_path()
    data = {
        "redis_url": redis_url,
        "namespace": namespace,
        "hooks_dir": str(hooks_dir.resolve()) if hooks_dir else None,
        "pid": os.getpid(),
        "folder": str(Path.cwd().resolve()),
    }
    _write(path, data)
    _point_at(path)
    return path


def remove_state(path: Path) -> None:
    """Mark the state file stopped if it is still this process's, and point the pointer at
    another live dev if there is one. The file stays (until the next ``hookbus dev`` in that
    folder) so that commands that used this dev say it stopped instead of quietly falling
    through to another Redis."""
    state = discovery.read_json(str(path))
    if state is None or state.get("pid") != os.getpid():
        return
    _write(path, {**state, "stopped": True})
    pointer = Path(discovery.pointer_path())
    pointed = discovery.read_json(str(pointer))
    if pointed is not None and pointed.get("state") != str(path):
        return  # another dev started since: the pointer is its
    others = [
        p
        for p in pointer.parent.glob("dev-*.json")
        if p != path and _live(discovery.read_json(str(p)))
    ]
    if others:
        _point_at(max(others, key=lambda p: p.stat().st_mtime))


def find_state() -> tuple[Path, dict[str, Any]] | None:
    """The state of a live ``hookbus dev`` for the cwd or a folder above it, else the one
    the pointer names."""
    found = discovery.find_dev()
    return (Path(found[0]), found[1]) if found else None


def _live(state: dict[str, Any] | None) -> bool:
    return state is not None and discovery.dev_alive(state)


def _point_at(state_file: Path) -> None:
    _write(Path(discovery.pointer_path()), {"state": str(state_file)})


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
    os.replace(tmp, path)
