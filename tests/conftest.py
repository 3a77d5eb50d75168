"""Shared fixtures: one fake Redis per test, one real server per session, one namespace
per test (its keys deleted afterwards)."""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterator

import fakeredis
import pytest
import redis

from hookbus.bus import keys
from hookbus.bus.embedded import EmbeddedServer

LOCAL_REDIS_URL = "redis://127.0.0.1:6379/0"


@pytest.fixture(scope="session", autouse=True)
def private_user_dirs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The user's hookbus folders of this run, away from the real home: a ``hookbus dev``
    started by a test records itself (and the per-user pointer) here, not where a real dev
    or another test run on the machine would find it, and no real user hookbus.toml is
    read. Every process a test starts inherits them."""
    base = tmp_path_factory.mktemp("user-dirs")
    saved = {k: os.environ.get(k) for k in ("XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")}
    for name, sub in (
        ("XDG_RUNTIME_DIR", "run"),
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_CACHE_HOME", "cache"),
    ):
        folder = base / sub
        folder.mkdir(mode=0o700)
        os.environ[name] = str(folder)
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(autouse=True)
def logging_as_found() -> Iterator[None]:
    """Each test leaves the root logger as it found it: a command run in-process configures
    logging (its own stderr handler in place of pytest's capture), which must not change
    what a later test's command prints."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def _answers(url: str) -> bool:
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=0.5, protocol=2)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (redis.exceptions.RedisError, OSError):
        return False


@pytest.fixture
def fake_redis() -> Iterator[fakeredis.FakeRedis]:
    """A FakeRedis on its own FakeServer: nothing shared between tests."""
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer(), protocol=2)
    yield client
    client.close()


@pytest.fixture(scope="session")
def real_redis_url() -> Iterator[str]:
    """A real server: $HOOKBUS_TEST_REDIS_URL, else 127.0.0.1:6379, else an embedded one."""
    url = os.environ.get("HOOKBUS_TEST_REDIS_URL")
    if url:
        if not _answers(url):
            pytest.fail(f"HOOKBUS_TEST_REDIS_URL={url} does not answer PING")
        yield url
        return
    if _answers(LOCAL_REDIS_URL):
        yield LOCAL_REDIS_URL
        return
    with EmbeddedServer() as server:
        yield server.url


@pytest.fixture
def namespace() -> str:
    """A namespace no other test uses."""
    return f"t{uuid.uuid4().hex[:10]}"


def delete_namespace(client: redis.Redis, ns: str) -> None:
    """Delete every key of a namespace, RQ's keys for its queue included."""
    patterns = (
        keys.namespace_pattern(ns),
        keys.state_pattern(ns),
        f"rq:*{keys.rq_queue_name(ns)}*",
    )
    for pattern in patterns:
        batch = list(client.scan_iter(match=pattern, count=1000))
        if batch:
            client.delete(*batch)


@pytest.fixture
def real_redis(real_redis_url: str, namespace: str) -> Iterator[redis.Redis]:
    """A client on the real server; the test's namespace is deleted before and after."""
    client = redis.Redis.from_url(real_redis_url, protocol=2)
    delete_namespace(client, namespace)
    yield client
    delete_namespace(client, namespace)
    client.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything under tests/integration is marked ``integration``."""
    for item in items:
        if "/integration/" in str(item.path):
            item.add_marker(pytest.mark.integration)
