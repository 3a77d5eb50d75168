"""Connections from every URL form on a real (embedded) server: TCP, unix socket, ACL user."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import redis

from hookbus.bus import connection
from hookbus.bus.embedded import EmbeddedServer
from hookbus.errors import RedisUnavailable


@pytest.fixture
def unix_server() -> Iterator[EmbeddedServer]:
    with EmbeddedServer(unix_socket=True) as server:
        yield server


@pytest.fixture
def tcp_server() -> Iterator[EmbeddedServer]:
    with EmbeddedServer() as server:
        yield server


def test_a_unix_socket_url_connects(unix_server: EmbeddedServer) -> None:
    assert unix_server.url.startswith("unix://")
    connection.ping(unix_server.url)
    assert connection.connect(unix_server.url).set("k", "v")
    connection.close_pools()


def test_an_acl_user_in_the_url_authenticates(tcp_server: EmbeddedServer) -> None:
    admin = redis.Redis.from_url(tcp_server.url)
    admin.execute_command("ACL", "SETUSER", "bus", "on", ">s3cret", "~hookbus:*", "+@all")
    url = f"redis://bus:s3cret@127.0.0.1:{tcp_server.port}/0"
    connection.ping(url)
    client = connection.connect(url)
    assert client.set("hookbus:{x}:k", "v")
    connection.close_pools()


def test_a_wrong_password_is_a_clear_error_without_the_password(
    tcp_server: EmbeddedServer,
) -> None:
    admin = redis.Redis.from_url(tcp_server.url)
    admin.execute_command("ACL", "SETUSER", "bus", "on", ">s3cret", "~*", "+@all")
    url = f"redis://bus:wrong@127.0.0.1:{tcp_server.port}/0"
    with pytest.raises(RedisUnavailable) as info:
        connection.ping(url)
    assert "wrong" not in str(info.value)
    assert "authentication failed" in str(info.value) or "WRONGPASS" in str(info.value)
    connection.close_pools()


def test_retries_ride_out_a_server_restart(tcp_server: EmbeddedServer) -> None:
    client = connection.connect(tcp_server.url)
    client.set("k", "1")
    port = tcp_server.port
    tcp_server.stop()
    outcome: list[object] = []

    def ping_through_the_outage() -> None:
        try:
            outcome.append(connection.idempotent(client, client.ping, budget_s=10.0))
        except Exception as exc:
            outcome.append(exc)

    pinger = threading.Thread(target=ping_through_the_outage)
    pinger.start()
    time.sleep(0.3)
    # started from this (long-lived) thread: the server dies with the thread that forked it
    restarted = EmbeddedServer(port=port)
    restarted.start()
    try:
        pinger.join(15)
        assert outcome == [True]
    finally:
        restarted.stop()
        connection.close_pools()
