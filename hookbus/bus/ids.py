"""Every id hookbus mints: event ids, request ids, client and worker tokens, and the
``user@host`` a person's change is recorded under; and the one place the agent id a
process's environment names is read.

One module for the SDK, the workers and the per-event hook, so the forms cannot drift
apart. Standard library only (``os``, ``time``): ``import uuid`` costs a per-event process
about 3 ms, and 16 bytes of ``os.urandom`` with the uuid4 bits set by hand give the same
value.
"""

from __future__ import annotations

import os
import time

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: the per-event path does not import typing
if TYPE_CHECKING:
    from collections.abc import Mapping

#: The variable naming the agent a process acts for: set by the agent's launcher (or a
#: wake action for the command it starts), read by the per-event hook and by the authoring
#: commands an agent runs.
AGENT_ID_ENV = "HOOKBUS_AGENT_ID"


def agent_id_from(environ: Mapping[str, str]) -> str | None:
    """The agent ``environ`` names (``$HOOKBUS_AGENT_ID``; blank counts as unset), or None."""
    return environ.get(AGENT_ID_ENV, "").strip() or None


def now_ms() -> int:
    """Wall-clock epoch milliseconds, the unit of every timestamp on the wire."""
    return time.time_ns() // 1_000_000


def new_id() -> str:
    """An event id (also a producer's id): 12 hex digits of epoch ms + 64 random bits,
    unique and roughly time-sortable."""
    return f"{now_ms():012x}{os.urandom(8).hex()}"


def new_request_id() -> str:
    """A fresh id for one blocking call, a uuid4 in hex: never the event's own id, because
    the same event may be sent again and must not meet the earlier call's reply."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    return raw.hex()


def token(hex_digits: int) -> str:
    """``hex_digits`` random hex digits: the unique tail of an inbox or worker name."""
    return os.urandom((hex_digits + 1) // 2).hex()[:hex_digits]


def user_at_host() -> str:
    """``user@host`` of this process (``unknown@host`` when the user has no name): who a
    change made from here is recorded as, when no one is named."""
    import getpass  # only a change pays for these, never the per-event hook
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"
