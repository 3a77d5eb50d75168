"""What a worker says when it starts: one line saying what it serves, at the default level.

An operator starting ``hookbus worker`` must see, without ``--log-level INFO``, which Redis
(credentials masked) and namespace it serves, how many partitions, how many hooks it loaded,
from which bundle, and whether that bundle's signature is checked; and where its metrics are
when the port was picked for it (``--metrics-port 0``). These lines go to the logger
:data:`ANNOUNCE_LOGGER`, which the CLI's logging set-up lets through at INFO while every other
module stays at the default WARNING (:func:`hookbus.cli.logs.configure_logging`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hookbus.bus.settings.schema import Settings

#: The logger whose INFO lines are shown at the default log level.
ANNOUNCE_LOGGER = "hookbus.announce"

log = logging.getLogger(ANNOUNCE_LOGGER)


def start_line(role: str, settings: Settings, info: dict[str, Any]) -> str:
    """``chain worker serving redis://***@host:6379/0, namespace 'default', 1 partition:
    3 hooks loaded from bundle v2 (signed by key ab12...)``; ``info`` is a HookHost's."""
    from hookbus.bus.settings.loader import mask_url

    partitions = settings.partitions
    parts = f"{partitions} partition" + ("" if partitions == 1 else "s")
    hooks = info.get("hooks", 0)
    version = info.get("version")
    if not version:
        source = "no bundle (nothing pushed yet: `hookbus reload`)"
    elif str(version).startswith("dir:"):
        source = f"its hooks folder ({version})"
    else:
        source = f"bundle {version}"
    trust = str(info.get("trust") or "unsigned")
    signed = (
        f"signed by key {trust.removeprefix('verified:')}"
        if trust.startswith("verified:")
        else "UNSIGNED: no verify key, any bundle in this Redis runs"
    )
    return (
        f"{role} worker serving {mask_url(settings.effective_redis_url)}, namespace "
        f"{settings.namespace!r}, {parts}: {hooks} hook(s) loaded from {source} ({signed})"
    )


def announce_start(role: str, settings: Settings, info: dict[str, Any]) -> None:
    """Log :func:`start_line` on :data:`ANNOUNCE_LOGGER`."""
    log.info("%s", start_line(role, settings, info))


def announce(message: str, *args: object) -> None:
    """Log one more start-up fact (the metrics address) on :data:`ANNOUNCE_LOGGER`."""
    log.info(message, *args)
