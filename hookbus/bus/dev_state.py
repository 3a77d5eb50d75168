"""Where a running ``hookbus dev`` is, so other commands find it without being told.

``hookbus dev`` starts an embedded server on a free port; before this file, every other
shell had to paste ``export HOOKBUS_REDIS_URL=...`` and repeat ``--hooks-dir`` for ``hooks
list`` and ``reload``. Now ``dev`` writes a small JSON state file (Redis URL, namespace,
hooks folder, its pid) and removes it on exit; commands run from the same folder (or one
below it) use those values for whatever is not configured (flag, ``HOOKBUS_*`` or
``hookbus.toml`` still win), and ``hookbus config show`` names the file as their source.

The file lives in ``$XDG_RUNTIME_DIR/hookbus/`` (else ``~/.cache/hookbus/``), one per
folder ``dev`` was started in (``dev-<name>-<crc32 of the path>.json``), so two projects,
or two test runs in their own temporary folders, never see each other's server.
``$HOOKBUS_DEV_STATE`` names the file outright. A file whose pid is gone is ignored.

Only the standard library is imported: the lean ``hookbus publish`` reads this file too.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

TYPE_CHECKING = False  # typing costs the lean commands a few ms
if TYPE_CHECKING:
    from typing import Any

    from hookbus.bus.settings.loader import LoadedSettings

#: Names the state file outright (tests, or a dev stack shared across folders).
STATE_ENV = "HOOKBUS_DEV_STATE"
#: The settings a running ``hookbus dev`` provides to other commands.
PROVIDED = ("redis_url", "namespace", "hooks_dir")


def state_dir() -> Path:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir():
        return Path(runtime) / "hookbus"
    return Path.home() / ".cache" / "hookbus"


def state_path(folder: Path | None = None) -> Path:
    """The state file of a ``hookbus dev`` started in ``folder`` (default: the cwd)."""
    explicit = os.environ.get(STATE_ENV)
    if explicit:
        return Path(explicit)
    import zlib

    where = (folder or Path.cwd()).resolve()
    tag = f"{zlib.crc32(str(where).encode()):08x}"
    name = "".join(c if c.isalnum() or c in "-_" else "_" for c in where.name) or "root"
    return state_dir() / f"dev-{name}-{tag}.json"


def write_state(*, redis_url: str, namespace: str, hooks_dir: Path | None) -> Path:
    """Record this ``hookbus dev`` (private to the user: the URL may carry a password)."""
    path = state_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    data = {
        "redis_url": redis_url,
        "namespace": namespace,
        "hooks_dir": str(hooks_dir.resolve()) if hooks_dir else None,
        "pid": os.getpid(),
    }
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
    os.replace(tmp, path)
    return path


def remove_state(path: Path) -> None:
    """Remove the state file if it is still this process's."""
    state = _read(path)
    if state is not None and state.get("pid") == os.getpid():
        path.unlink(missing_ok=True)


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return True


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def find_state() -> tuple[Path, dict[str, Any]] | None:
    """The state of a live ``hookbus dev`` for the cwd or a folder above it."""
    if os.environ.get(STATE_ENV):
        candidates = [state_path()]
    else:
        here = Path.cwd().resolve()
        candidates = [state_path(folder) for folder in (here, *here.parents)]
    for path in candidates:
        state = _read(path)
        if state is not None and _alive(state.get("pid")):
            return path, state
    return None


def apply_state(
    loaded: LoadedSettings, config_file: str | None, overrides: dict[str, Any]
) -> LoadedSettings:
    """``loaded`` with what a live ``hookbus dev`` provides filled in where nothing was
    configured; ``loaded`` itself when there is no such dev or nothing to fill."""
    found = find_state()
    if found is None:
        return loaded
    path, state = found
    fill = {
        key: state[key]
        for key in PROVIDED
        if isinstance(state.get(key), str) and key not in loaded.sources
    }
    if not fill:
        return loaded
    from hookbus.bus.settings.loader import load_settings

    given = {k: v for k, v in overrides.items() if v is not None}
    again = load_settings(config_file, overrides={**fill, **given}, warn=False)
    for key in fill:
        again.sources[key] = f"dev:{path}"
    return again
