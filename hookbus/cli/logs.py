"""Logging set-up for every command and worker role: ``--log-format text|json``.

Only the CLI configures logging (the library just calls ``logging.getLogger(__name__)``).
In ``json`` mode every line on stderr is one JSON object — ``ts``, ``level``, ``logger``,
``msg`` and any structured fields a module passed with ``extra={"fields": {...}}`` — so a
log shipper needs no parsing rules; tracebacks go into ``exc`` as text, never local values.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, Literal

LogFormat = Literal["text", "json"]

#: The text format: time, level, logger, message; structured fields follow as key=value.
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: Key of ``extra`` under which a record carries its structured fields.
FIELDS_KEY = "fields"


class JsonFormatter(logging.Formatter):
    """One JSON object per record; structured fields are merged in at the top level."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, FIELDS_KEY, None)
        if isinstance(fields, dict):
            for key, value in fields.items():
                data.setdefault(str(key), value)
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """The classic line, with structured fields appended as ``key=value``."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = getattr(record, FIELDS_KEY, None)
        if isinstance(fields, dict) and fields:
            line += " " + " ".join(f"{k}={v}" for k, v in fields.items())
        return line


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A handler writing to whatever ``sys.stderr`` is when each record is emitted, not
    the stream of the moment it was made: a test runner or an embedding program that swaps
    ``sys.stderr`` and closes the old one would otherwise get "Logging error" reports
    (printed into its next capture) instead of the records."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        """Ignored: the stream is always the current ``sys.stderr``."""


def configure_logging(level: str, log_format: LogFormat = "text") -> None:
    """Install one stderr handler on the root logger (replacing any earlier one)."""
    if log_format not in ("text", "json"):
        raise ValueError(f"log format must be text or json, got {log_format!r}")
    handler = StderrHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # a worker's start-up line (what it serves, where its metrics are) is shown at the
    # default level; a level chosen quieter than the default hides it with the rest
    from hookbus.workers.fleet.announce import ANNOUNCE_LOGGER

    quiet_default = root.level == logging.WARNING
    logging.getLogger(ANNOUNCE_LOGGER).setLevel(logging.INFO if quiet_default else logging.NOTSET)
