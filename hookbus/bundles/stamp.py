"""The single-host stamp file: ``<reload.data_dir>/hooks_reload.stamp``.

On one host without a bundle in Redis, touching this file tells every worker "reload your
hooks folder". ``hookbus reload`` also writes it after each push, as a convenience for tools
that watch files; the fleet itself follows the Redis stamp (:mod:`hookbus.bundles.store`).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from hookbus.bus.shipped import STAMP_FILENAME
from hookbus.bus.wire import now_ms

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings

log = logging.getLogger(__name__)


def stamp_file_path(settings: Settings) -> Path | None:
    """``<reload.data_dir>/hooks_reload.stamp``, or None when no data dir is configured."""
    if not settings.reload.data_dir:
        return None
    return Path(settings.reload.data_dir).expanduser() / STAMP_FILENAME


def write_stamp_file(settings: Settings, version: str) -> Path | None:
    """Write the stamp file (atomically) when a data dir is configured."""
    path = stamp_file_path(settings)
    if path is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    body = json.dumps({"version": version, "ts_ms": now_ms()}) + "\n"
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(body)
    os.replace(tmp, path)
    return path


def read_stamp_file(path: Path) -> tuple[int, str | None] | None:
    """(mtime in ns, version or None) of the stamp file, or None when there is none."""
    try:
        st = path.stat()
        text = path.read_text()
    except FileNotFoundError:
        return None
    version: str | None = None
    try:
        data = json.loads(text)
        if isinstance(data, dict) and isinstance(data.get("version"), str):
            version = data["version"]
    except json.JSONDecodeError:
        version = None
    return st.st_mtime_ns, version


class StampFileWatch:
    """Tells once per new stamp file (newer than the last one seen) that it changed. The
    file is left in place: several workers on one host read it."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._seen: tuple[int, str | None] | None = None

    def read(self) -> tuple[int, str | None] | None:
        if self.path is None:
            return None
        try:
            return read_stamp_file(self.path)
        except OSError as exc:
            log.warning("cannot read %s: %s", self.path, exc)
            return None

    def mark_seen(self) -> None:
        """Take the file as it is now as handled (a worker loading at start)."""
        self._seen = self.read()

    def changed(self) -> bool:
        seen = self.read()
        if seen is None or seen == self._seen:
            return False
        self._seen = seen
        return True
