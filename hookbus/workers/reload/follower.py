"""Hearing of reloads: the reload channel, followed from a daemon thread, and a poll.

A reload is announced on the namespace's reload channel, but pub/sub is lossy: a
disconnected subscriber misses messages, and redis-py resubscribes silently after a
reconnect. So the :class:`ReloadFollower` calls its ``check`` (the host compares the stamp
with what it runs) after every announcement, after every (re)subscription, and about once a
second whatever happens; Redis trouble is retried with backoff and never ends the thread.
What a check loads is :class:`~hookbus.workers.reload.hookset.HookHost`'s business.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from hookbus.bus import ids
from hookbus.bus.connection import CONNECTION_ERRORS

log = logging.getLogger(__name__)

#: How often the follower checks even without an announcement, in seconds.
STAMP_POLL_INTERVAL_S = 1.0
#: How long one wait for an announcement lasts before the follower looks around, in s.
PUBSUB_WAIT_S = 0.25
#: Longest wait between two tries to reach Redis again, in seconds.
RECONNECT_MAX_WAIT_S = 2.0
#: How long stopping waits for the follower thread, in seconds.
STOP_TIMEOUT_S = 3.0


class ReloadFollower:
    """Subscribes to ``channel`` on a connection of its own (named ``client_name``, so that
    ``CLIENT LIST`` shows whose it is) and calls ``check()`` when a reload may have happened;
    ``announced()`` first when the announcement was explicit."""

    def __init__(
        self,
        channel: str,
        namespace: str,
        *,
        check: Callable[[], object],
        announced: Callable[[], None],
    ) -> None:
        self.channel = channel
        self.check = check
        self.announced = announced
        self.client_name = (
            f"hookbus-reload.{namespace}.{socket.gethostname()}.{os.getpid()}.{ids.token(6)}"
        )
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._client: redis.Redis | None = None
        self._pubsub: Any = None
        self._pubsub_client: redis.Redis | None = None
        self._last_check = 0.0

    def start(self, client: redis.Redis) -> None:
        """Follow on a connection like ``client``'s, from a daemon thread."""
        self._client = client
        self._stop.clear()
        self._thread = threading.Thread(target=self._follow, name="hookbus-reload", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop following; the subscriber connection is closed."""
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(STOP_TIMEOUT_S)
        self._thread = None
        if thread is None or not thread.is_alive():
            self._close_pubsub()

    def _follow(self) -> None:
        try:
            self._follow_loop()
        finally:
            self._close_pubsub()

    def _follow_loop(self) -> None:
        wait_s = 0.05
        while not self._stop.is_set():
            try:
                if self._pubsub is None:
                    self._subscribe()
                    self._wake.set()  # (re)subscribed: catch up on what we missed
                message = self._pubsub.get_message(timeout=PUBSUB_WAIT_S)
                if message is not None and message.get("type") == "message":
                    self.announced()
                    self._wake.set()
                due = time.monotonic() - self._last_check >= STAMP_POLL_INTERVAL_S
                if self._wake.is_set() or due:
                    self._wake.clear()
                    self._last_check = time.monotonic()
                    self.check()
                wait_s = 0.05
            except CONNECTION_ERRORS as exc:
                log.warning("reload listener lost Redis (%s); retrying in %.2fs", exc, wait_s)
                self._close_pubsub()
                self._stop.wait(wait_s)
                wait_s = min(wait_s * 2, RECONNECT_MAX_WAIT_S)
            except Exception:
                log.exception("reload listener error; continuing")
                self._stop.wait(wait_s)
                wait_s = min(wait_s * 2, RECONNECT_MAX_WAIT_S)

    def _subscribe(self) -> None:
        if self._client is None:
            raise RuntimeError("ReloadFollower.start(client) was not called")
        pool = self._client.connection_pool
        kwargs = dict(pool.connection_kwargs)
        kwargs["client_name"] = self.client_name
        sub_pool = redis.ConnectionPool(connection_class=pool.connection_class, **kwargs)
        self._pubsub_client = redis.Redis(connection_pool=sub_pool)
        pubsub = self._pubsub_client.pubsub()  # type: ignore[no-untyped-call]
        pubsub.subscribe(self.channel)
        if pubsub.connection is not None:
            pubsub.connection.register_connect_callback(self._on_pubsub_connect)
        self._pubsub = pubsub

    def _on_pubsub_connect(self, connection: object) -> None:
        """redis-py reconnected the subscriber on its own: messages may have been lost."""
        self._wake.set()

    def _close_pubsub(self) -> None:
        pubsub, self._pubsub = self._pubsub, None
        client, self._pubsub_client = self._pubsub_client, None
        if pubsub is not None:
            try:
                pubsub.close()
            except Exception:
                log.debug("closing the reload subscriber failed", exc_info=True)
        if client is not None:
            try:
                client.connection_pool.disconnect()
            except Exception:
                log.debug("closing the reload pool failed", exc_info=True)
