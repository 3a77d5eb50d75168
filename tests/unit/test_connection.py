"""Redis connections: URL checks, error translation, the retry policy."""

from __future__ import annotations

import time

import pytest
import redis

from hookbus.bus import connection
from hookbus.bus.embedded import free_port
from hookbus.errors import ConfigError, RedisCommandError, RedisUnavailable


@pytest.mark.parametrize(
    "url",
    ["redis://127.0.0.1:6379/0", "rediss://user:pw@host:6380/1", "unix:///tmp/redis.sock"],
)
def test_supported_urls_are_accepted(url: str) -> None:
    assert connection.check_url(url) == url


@pytest.mark.parametrize("url", ["http://localhost:6379", "localhost:6379", "tcp://x"])
def test_other_urls_are_refused_with_a_valid_example(url: str) -> None:
    with pytest.raises(ConfigError, match=r"redis://\[user:password@\]host:port/db"):
        connection.check_url(url)


def test_an_unreachable_server_is_one_clear_line_with_the_url_and_a_way_out() -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    with pytest.raises(RedisUnavailable) as info:
        connection.ping(url)
    message = str(info.value)
    assert url in message
    assert "hookbus dev" in message
    assert "\n" not in message


def test_passwords_never_appear_in_connection_errors() -> None:
    url = f"redis://bus:hunter2@127.0.0.1:{free_port()}/0"
    with pytest.raises(RedisUnavailable) as info:
        connection.ping(url)
    assert "hunter2" not in str(info.value)


def test_command_errors_are_translated() -> None:
    exc = connection.translate_error(redis.exceptions.ResponseError("WRONGTYPE"), "redis://h")
    assert isinstance(exc, RedisCommandError)


def test_the_retry_policy_gives_up_within_its_budget() -> None:
    calls = 0

    def always_down() -> None:
        nonlocal calls
        calls += 1
        raise redis.exceptions.ConnectionError("down")

    start = time.monotonic()
    with pytest.raises(redis.exceptions.ConnectionError):
        connection.retry_policy(budget_s=0.3)(always_down)
    assert calls >= 2
    assert time.monotonic() - start < 3.0


def test_the_retry_policy_does_not_retry_command_errors() -> None:
    calls = 0

    def refused() -> None:
        nonlocal calls
        calls += 1
        raise redis.exceptions.ResponseError("NOPERM")

    with pytest.raises(redis.exceptions.ResponseError):
        connection.retry_policy(budget_s=1.0)(refused)
    assert calls == 1


def test_one_pool_per_process_and_url() -> None:
    a = connection.connect("redis://127.0.0.1:1/0")
    b = connection.connect("redis://127.0.0.1:1/0")
    assert a.connection_pool is b.connection_pool
    connection.close_pools()
