"""Trimming the request and event streams on the consumers' side, never past delivery.

Producers add to the request and event streams without trimming them (an XADD MAXLEN
would drop the oldest entries whether or not a chain worker or dispatcher had read them),
and refuse to add once a stream holds its limit (``streams.requests_maxlen`` /
``streams.events_maxlen``) of entries, saying so. Each chain worker and dispatcher process
runs a :class:`StreamTrimmer` over the streams it consumes: every :data:`TRIM_INTERVAL_S` it
trims the stream down to half its limit (the history ``hookbus replay`` and ``hookbus tail``
read), but only of what every consumer group has been delivered and has acknowledged
(``stream_trim.lua``). So a stream holds at most half its limit of history plus what waits
unread, and producers are refused only when that backlog reaches about half the limit.

Entries trimmed before delivery anyway (by a producer that still sends XADD MAXLEN) are
found by the same script: counted in Redis (``hookbus status`` shows them, the metrics
export them), logged here, and the group's lag is set right again (KEDA scales on it).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

import redis

from hookbus.bus import keys, lua
from hookbus.bus.connection import CONNECTION_ERRORS

log = logging.getLogger(__name__)

#: How often the streams are trimmed, in seconds: between two trims a stream holds at most
#: this long's traffic beyond its history and backlog.
TRIM_INTERVAL_S = 1.0
#: Every how many trims the script also looks for entries lost to a trim before delivery
#: (two XINFO and an XPENDING per group: not worth paying every second).
LOST_CHECK_EVERY = 10

_ERRORS: tuple[type[BaseException], ...] = (*CONNECTION_ERRORS, redis.exceptions.RedisError)


def history_of(limit: int) -> int:
    """Entries of delivered history a stream keeps: half its limit, so producers meet the
    limit only when the other half waits unread."""
    return max(1, limit // 2)


@dataclass
class TrimmedStream:
    """One stream a trimmer looks after, and what it found there."""

    client: redis.Redis
    key: str
    #: The setting that bounds it (``streams.requests_maxlen``), named in logs.
    setting: str
    limit: int
    length: int = 0
    trimmed: int = 0
    lost: int = 0
    _over: bool = False


class StreamTrimmer:
    """Trims a process's streams from a daemon thread (see the module docstring)."""

    def __init__(
        self,
        streams: list[TrimmedStream],
        stop_event: threading.Event,
        *,
        interval_s: float = TRIM_INTERVAL_S,
    ) -> None:
        self.streams = streams
        self.stop_event = stop_event
        self.interval_s = interval_s
        self._scripts: dict[int, Any] = {}
        self._thread: threading.Thread | None = None
        self._rounds = 0

    @property
    def lost(self) -> int:
        """Entries this process found trimmed before delivery, over all its streams."""
        return sum(s.lost for s in self.streams)

    def start(self) -> StreamTrimmer:
        self._thread = threading.Thread(target=self._run, name="stream-trimmer", daemon=True)
        self._thread.start()
        return self

    def join(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:  # a first round at once: the script is loaded as the worker starts
            self._rounds += 1
            look = self._rounds % LOST_CHECK_EVERY == 1
            for stream in self.streams:
                self.trim(stream, look_for_lost=look)
            if self.stop_event.wait(self.interval_s):
                return

    def trim(self, stream: TrimmedStream, *, look_for_lost: bool = True) -> None:
        """Trim one stream once, and look for entries lost to a trim before delivery when
        ``look_for_lost`` (errors are logged; the next round tries again)."""
        script = self._scripts.get(id(stream.client))
        if script is None:
            script = lua.register(stream.client, "hookbus.workers.fleet", "stream_trim.lua")
            self._scripts[id(stream.client)] = script
        try:
            trimmed, length, lost = script(
                keys=[stream.key, keys.trimmed_undelivered(stream.key)],
                args=[history_of(stream.limit), "1" if look_for_lost else "0"],
            )
        except _ERRORS as exc:
            log.debug("stream %s not trimmed: %s", stream.key, exc)
            return
        stream.trimmed += int(trimmed)
        stream.length = int(length)
        if lost:
            stream.lost += int(lost)
            log.error(
                "%d entries of %s were trimmed before their consumer group read them (an "
                "XADD MAXLEN by some producer); counted in %s",
                lost,
                stream.key,
                keys.trimmed_undelivered(stream.key),
            )
        over = stream.length >= stream.limit
        if over != stream._over:
            stream._over = over
            if over:
                log.warning(
                    "%s holds %d entries not yet delivered and acknowledged (%s = %d): "
                    "producers are refused until it drains",
                    stream.key,
                    stream.length,
                    stream.setting,
                    stream.limit,
                )
            else:
                log.info("%s is below %s again (%d entries)", stream.key, stream.setting, length)
