"""Shared fixtures: one fake Redis per test, one real server per session, one namespace
per test (its keys deleted afterwards)."""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import fakeredis
import hypothesis
import pytest
import redis

from hookbus.bus.embedded import EmbeddedServer
from tests.redis_cleanup_helpers import delete_namespace
from tests.user_dirs_helpers import (
    TOOL_CONFIG_FILES,
    USER_DIR_VARIABLES,
    forget_stopped_devs,
    private_environment,
    remove_tree,
    session_temp_dir,
    tool_config_environment,
)

#: Names a shared server for the tests instead of one of their own (each test still keeps
#: to its own namespace and deletes it).
TEST_REDIS_ENV = "HOOKBUS_TEST_REDIS_URL"


def pytest_configure(config: pytest.Config) -> None:
    """Hypothesis's deadline and its too-slow health check time the machine, not the code,
    when pytest-xdist workers and whatever else runs share the cores: the suite's profile
    turns them off (``--hypothesis-profile`` still picks another)."""
    hypothesis.settings.register_profile(
        "hookbus", deadline=None, suppress_health_check=[hypothesis.HealthCheck.too_slow]
    )
    if not config.getoption("--hypothesis-profile", None):
        hypothesis.settings.load_profile("hookbus")


@pytest.fixture(scope="session", autouse=True)
def private_user_dirs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A private home, XDG folders and temp folder for the whole run, so nothing a test
    starts writes to the user's real ones: a ``hookbus dev`` records itself (and the
    per-user pointer) here, not where a real dev or another test run on the machine would
    find it; bundle caches, installers' settings, Chromium's profile, tmux's sockets and
    example hooks' files land here too, and no real user hookbus.toml is read. Every process
    a test starts inherits them; each pytest-xdist worker has its own. The tools the tests
    drive keep reading their own configuration from the real home
    (:func:`tool_config_environment`)."""
    names = (*USER_DIR_VARIABLES, *(name for name, _ in TOOL_CONFIG_FILES))
    saved = {name: os.environ.get(name) for name in names}
    saved_tempdir = tempfile.tempdir
    temp = session_temp_dir()
    private = private_environment(tmp_path_factory.mktemp("user-dirs"), temp)
    os.environ.update(tool_config_environment(Path.home(), os.environ))
    os.environ.update(private)
    tempfile.tempdir = private["TMPDIR"]  # gettempdir() read $TMPDIR once, before this
    yield private
    tempfile.tempdir = saved_tempdir
    remove_tree(temp)
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(autouse=True)
def no_stopped_dev_inherited(private_user_dirs: dict[str, str]) -> Iterator[None]:
    """A ``hookbus dev`` a test started and stopped leaves its state file (and the per-user
    pointer to it) behind on purpose: every later command in that home then refuses to fall
    through to another Redis. The next test of the same worker starts from a home where no
    dev ran, as a user who never started one would."""
    yield
    forget_stopped_devs(Path(private_user_dirs["XDG_RUNTIME_DIR"]) / "hookbus")


@pytest.fixture(autouse=True)
def terminal_size_of_this_test() -> None:
    """The CLI's rich consoles are made once a process, and one made while ``$COLUMNS`` was
    set keeps that width for good: under pytest-xdist, whichever test of a worker first
    printed (``COLUMNS=80`` in one, 200 in another) would fix the width every later test of
    that worker sees. Before each test they go back to reading ``$COLUMNS``/``$LINES`` as
    the test sets them."""
    support = sys.modules.get("hookbus.cli.support")
    for made in getattr(support, "_consoles", {}).values():
        made._width = None  # rich's own fields: set from $COLUMNS/$LINES when it was made
        made._height = None


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
    """A real server of this run's own (the embedded one, else a ``redis-server`` on a free
    port), one per pytest-xdist worker; a shared server only when
    ``$HOOKBUS_TEST_REDIS_URL`` names it. The suite never writes into a Redis someone else
    runs on 127.0.0.1:6379 just because it answers."""
    url = os.environ.get(TEST_REDIS_ENV)
    if url:
        if not _answers(url):
            pytest.fail(f"{TEST_REDIS_ENV}={url} does not answer PING")
        yield url
        return
    with EmbeddedServer() as server:
        yield server.url


@pytest.fixture
def namespace() -> str:
    """A namespace no other test uses."""
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture
def real_redis(real_redis_url: str, namespace: str) -> Iterator[redis.Redis]:
    """A client on the real server; the test's namespace is deleted before and after."""
    client = redis.Redis.from_url(real_redis_url, protocol=2)
    delete_namespace(client, namespace)
    yield client
    delete_namespace(client, namespace)
    client.close()


#: Fixtures whose tests drive an agent CLI installed from npm.
AGENT_CLI_FIXTURES = frozenset(
    {"claude_bin", "gemini_bin", "codex_bin", "copilot_bin", "qwen_bin", "cline_bin"}
)
#: Fixtures whose tests need a real Redis-compatible server.
REAL_SERVER_FIXTURES = frozenset({"real_redis", "real_redis_url"})
#: The time limit of a test that drives an agent CLI, in seconds: the first one of a run may
#: install the CLI with npm first (agent_clis.NPM_INSTALL_TIMEOUT_S), or wait for another
#: pytest-xdist worker doing so.
AGENT_CLI_TIMEOUT_S = 1200


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything under tests/integration, and every test that uses the real server, is
    marked ``integration``; a test that drives an agent CLI is marked ``agent_cli`` and may
    take as long as an npm install of it."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if "/integration/" in str(item.path) or fixtures & REAL_SERVER_FIXTURES:
            item.add_marker(pytest.mark.integration)
        if fixtures & AGENT_CLI_FIXTURES:
            item.add_marker(pytest.mark.agent_cli)
        if item.get_closest_marker("agent_cli") is not None:
            item.add_marker(pytest.mark.timeout(AGENT_CLI_TIMEOUT_S))
