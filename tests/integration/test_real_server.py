"""The real-server fixture answers and cleans up its namespace."""

from __future__ import annotations

import redis

from hookbus.bus import keys


def test_real_server_answers_and_namespace_starts_empty(
    real_redis: redis.Redis, namespace: str
) -> None:
    assert real_redis.ping()
    assert list(real_redis.scan_iter(match=keys.namespace_pattern(namespace))) == []
    real_redis.set(keys.bundle_stamp(namespace), "v1")
    assert real_redis.get(keys.bundle_stamp(namespace)) == b"v1"
