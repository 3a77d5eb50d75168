"""The fixtures themselves behave: fakes are isolated, the real server answers."""

from __future__ import annotations

import fakeredis


def test_each_fake_redis_starts_empty(fake_redis: fakeredis.FakeRedis) -> None:
    assert fake_redis.dbsize() == 0
    fake_redis.set("k", "v")
    assert fake_redis.get("k") == b"v"
