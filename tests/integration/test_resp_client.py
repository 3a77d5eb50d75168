"""The lean RESP2 client (hookbus.bus.resp) against the real server."""

from __future__ import annotations

import time

import pytest
import redis

from hookbus.bus import keys
from hookbus.bus.ids import new_request_id
from hookbus.bus.resp import Address, RespConnection, RespTimeout, pack
from hookbus.errors import RedisCommandError, RedisUnavailable


def test_commands_and_pipelines_read_every_reply_type(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    key = keys.events(namespace)
    with RespConnection(real_redis_url) as conn:
        assert conn.call("PING") == b"PONG"
        entry = conn.call("XADD", key, "*", "e", b"\x00\xffbinary")
        assert isinstance(entry, bytes) and b"-" in entry
        replies = conn.pipeline(
            [("XLEN", key), ("GET", key), ("HGETALL", keys.workers(namespace)), ("GET", "nokey")]
        )
        assert replies[0] == 1
        assert isinstance(replies[1], RedisCommandError)  # WRONGTYPE, as a value
        assert replies[2] == []
        assert replies[3] is None
        assert conn.call("XRANGE", key, "-", "+")[0][1] == [b"e", b"\x00\xffbinary"]  # type: ignore[index]
    assert real_redis.xlen(key) == 1


def test_an_error_reply_raises_from_call_and_keeps_the_connection_usable(
    real_redis_url: str,
) -> None:
    with RespConnection(real_redis_url) as conn:
        with pytest.raises(RedisCommandError, match="unknown command"):
            conn.call("NOSUCHCOMMAND")
        assert conn.call("PING") == b"PONG"


def test_large_values_arrive_whole(real_redis_url: str, namespace: str) -> None:
    key = keys.bundle(namespace, "big")
    value = bytes(range(256)) * 4096  # 1 MiB, spans many recv calls
    with RespConnection(real_redis_url) as conn:
        conn.call("SET", key, value)
        assert conn.call("GET", key) == value
        conn.call("DEL", key)


def test_a_read_past_the_deadline_times_out_and_drops_the_connection(
    real_redis_url: str, namespace: str
) -> None:
    with RespConnection(real_redis_url) as conn:
        start = time.monotonic()
        with pytest.raises(RespTimeout):
            conn.call("BLPOP", keys.reply(namespace, new_request_id()), 5, deadline=start + 0.2)
        assert 0.15 < time.monotonic() - start < 1.0
        assert not conn.connected  # a late reply can never be read as the next answer
        assert conn.call("PING") == b"PONG"  # and the next call reconnects


def test_the_url_selects_the_database(real_redis_url: str, namespace: str) -> None:
    base = real_redis_url.rsplit("/", 1)[0]
    key = keys.bundle_stamp(namespace)
    other = redis.Redis.from_url(f"{base}/3", protocol=2)
    try:
        with RespConnection(f"{base}/3") as conn:
            conn.call("SET", key, "in-db-3")
        assert other.get(key) == b"in-db-3"
    finally:
        other.delete(key)
        other.close()


def test_a_refused_auth_is_redis_unavailable_with_the_password_masked(
    real_redis_url: str,
) -> None:
    host = real_redis_url.split("//", 1)[1].rsplit("/", 1)[0]
    with pytest.raises(RedisUnavailable) as caught:
        RespConnection(f"redis://nobody:s3cret@{host}/0").call("PING")
    assert "s3cret" not in str(caught.value)
    assert "setup refused" in str(caught.value)


def test_nothing_listening_is_redis_unavailable_at_once() -> None:
    start = time.monotonic()
    with pytest.raises(RedisUnavailable, match="refused"):
        RespConnection("redis://127.0.0.1:1/0").call("PING")
    assert time.monotonic() - start < 1.0


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://127.0.0.1:6379/0", ("127.0.0.1", 6379, 0, None, None, None, False)),
        ("redis://:pw@h:1/3", ("h", 1, 3, None, "pw", None, False)),
        ("redis://user:p%40w@h", ("h", 6379, 0, "user", "p@w", None, False)),
        ("rediss://cache.example:6380", ("cache.example", 6380, 0, None, None, None, True)),
        ("unix:///tmp/r.sock?db=2", ("127.0.0.1", 6379, 2, None, None, "/tmp/r.sock", False)),
        ("redis://[::1]:7000/1", ("::1", 7000, 1, None, None, None, False)),
        ("redis://h?db=4", ("h", 6379, 4, None, None, None, False)),
    ],
)
def test_urls_parse_as_redis_py_reads_them(url: str, expected: tuple[object, ...]) -> None:
    a = Address(url)
    assert (a.host, a.port, a.db, a.username, a.password, a.path, a.tls) == expected


@pytest.mark.parametrize("url", ["http://h", "redis://h/x", "redis://h:port/0", "h:6379"])
def test_bad_urls_are_refused_with_the_reason(url: str) -> None:
    with pytest.raises(RedisUnavailable):
        Address(url)


def test_pack_writes_resp_arrays_of_bulk_strings() -> None:
    assert pack("SET", b"k", 1) == b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\n1\r\n"


def test_request_ids_are_uuid4_hex() -> None:
    import uuid

    value = new_request_id()
    assert uuid.UUID(hex=value).version == 4
    assert value != new_request_id()
