"""Putting back what a Redis that lost its state no longer holds, from what a worker runs.

Redis may come back empty (a restart with nothing kept on disk, a failover to an empty
replica, a mistaken ``FLUSHALL``). The worker still runs the last bundle it loaded and,
when it verifies signatures, keeps that bundle in its private cache. What producers need
from Redis to fail closed is the bundle's failure policy (the kinds it guards): without
it they would read "nothing is guarded". So while the stamp is missing, a worker serving a
bundle writes that bundle's policy back, only where no policy is stored (``SET NX``: a
reload's own write always wins), and says so once. The bundle and its stamp are the
operator's to publish again (``hookbus reload``); the worker serves its copy meanwhile.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import redis

from hookbus.bus import keys
from hookbus.bus.connection import CONNECTION_ERRORS
from hookbus.bus.policy import guarded

log = logging.getLogger(__name__)

_WRITE_ERRORS: tuple[type[BaseException], ...] = (
    redis.exceptions.ResponseError,
    *CONNECTION_ERRORS,
)


def restore_policy(client: redis.Redis, namespace: str, version: str, kinds: Sequence[str]) -> bool:
    """Write the failure policy of ``version`` (guarding ``kinds``) where none is stored;
    True when this call wrote it. Redis trouble or a Redis user without the right is
    logged and answered False: the producers keep the policy they last saw anyway."""
    key = keys.fail_policy(namespace)
    try:
        written = bool(client.set(key, guarded.encode(version, kinds), nx=True))
    except _WRITE_ERRORS as exc:
        # NOPERM (a Redis user without the right), OOM, READONLY, or no Redis at all
        log.warning("the failure policy is missing from Redis and was not written: %s", exc)
        return False
    if written:
        log.warning(
            "Redis holds no bundle stamp and no failure policy (restarted empty?): wrote the "
            "policy of bundle %s (guarded: %s) back; run `hookbus reload` to publish the "
            "bundle again",
            version,
            ", ".join(sorted(kinds)) or "none",
        )
    return written
