"""The reload channel's subscriber: one pub/sub connection of its own, named, that says when
it (re)connected (pub/sub drops what was published while a subscriber was away, and redis-py
resubscribes silently after a reconnect, so the follower must then compare the stamp)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, cast

import redis

log = logging.getLogger(__name__)


class ReloadSubscriber:
    """Subscribed to ``channel`` on a pool of its own (named ``client_name``, on ``client``'s
    server); ``on_connect`` is called after each (re)connection."""

    def __init__(
        self, client: redis.Redis, channel: str, client_name: str, on_connect: Callable[[], None]
    ) -> None:
        pool = client.connection_pool
        kwargs = dict(pool.connection_kwargs)
        kwargs["client_name"] = client_name
        sub_pool = redis.ConnectionPool(connection_class=pool.connection_class, **kwargs)
        self._on_connect = on_connect
        self._client: redis.Redis | None = redis.Redis(connection_pool=sub_pool)
        # through Any: redis-py types pubsub() in some releases and not in others
        self._pubsub: Any = cast(Any, self._client).pubsub()
        self._pubsub.subscribe(channel)
        if self._pubsub.connection is not None:
            # a bound method: redis-py keeps connect callbacks as weak method references
            self._pubsub.connection.register_connect_callback(self._connected)

    def _connected(self, connection: object) -> None:
        self._on_connect()

    def announced(self, timeout_s: float) -> bool:
        """Whether a message came on the channel within ``timeout_s``."""
        message = self._pubsub.get_message(timeout=timeout_s)
        return message is not None and message.get("type") == "message"

    def close(self) -> None:
        pubsub, self._pubsub = self._pubsub, None
        client, self._client = self._client, None
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
