"""Bundles cannot be rolled back silently, the history's tail is anchored, and a restarted
verifying worker serves the last bundle it verified: on the real Redis, with real keys.

* every release carries a signed sequence: a verifying worker refuses a bundle older than
  one it verified, when the stamp is moved back by someone without the signing key;
  ``hookbus reload --rollback`` signs the rollback and is taken;
* the current bundle's signature covers the history's last entry when it was released: a
  history cut back from its end is reported by ``hooks history`` and ``status``;
* a verifying worker restarted while the stamp names a bundle it refuses serves the last
  bundle it verified (from its private cache), and ``status`` says which.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from hookbus.authoring import release
from hookbus.bundles import history, signing
from hookbus.bundles import store as bundle_store
from hookbus.bus.keys import Keys, hook_history
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event, HookResult
from hookbus.hooks.registry import HookRegistry
from hookbus.workers.fleet.heartbeat import Heartbeat
from hookbus.workers.reload.hookset import HookHost
from tests.reload_helpers import write_hook


@pytest.fixture
def settings(real_redis_url: str, namespace: str) -> Settings:
    return Settings(redis_url=real_redis_url, namespace=namespace)


@pytest.fixture
def pair(tmp_path: Path) -> signing.KeyPaths:
    return signing.generate_keys(tmp_path / "keys")


@pytest.fixture
def registry() -> HookRegistry:
    reg = HookRegistry()
    reg.register("static", lambda event: HookResult(context=["ran:static"]), events=["PreToolUse"])
    return reg


def ran(registry: HookRegistry) -> list[str]:
    decision = registry.run(Event(kind="PreToolUse", payload={"tool_name": "Bash"}))
    return [c for c in decision.context if c.startswith("ran:") and c != "ran:static"]


@pytest.fixture
def hosts(registry: HookRegistry, settings: Settings, tmp_path: Path) -> Iterator[Any]:
    """Makes verifying hosts sharing one private cache folder (a worker and its restarts)."""
    made: list[HookHost] = []

    def make(pair: signing.KeyPaths) -> HookHost:
        host = HookHost(
            registry,
            settings,
            hooks_dir=None,
            cache_dir=tmp_path / "cache",
            verify_key=signing.load_verify_key(pair.verify),
        )
        made.append(host)
        return host

    yield make
    for host in made:
        host.stop()


ROOT = Path(__file__).resolve().parents[2]


def hookbus(url: str, ns: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HOOKBUS_REDIS_URL=url, HOOKBUS_NAMESPACE=ns, PYTHONPATH=str(ROOT))
    env["COLUMNS"] = "200"
    return subprocess.run(
        [sys.executable, "-m", "hookbus", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def push(client: redis.Redis, settings: Settings, root: Path, name: str, key: Any) -> str:
    write_hook(root / name, "alpha", text=f"ran:{name}")
    return release.release_folder(client, settings, root / name, signing_key=key).version


def move_stamp_back(client: redis.Redis, ns: str, version: str) -> None:
    """What a holder of a Redis user that may write the stamp can do: no key needed."""
    keys = Keys.for_namespace(ns)
    client.set(keys.bundle_stamp, version)
    client.publish(keys.reload_channel, version)


def test_an_older_signed_bundle_made_current_without_the_key_is_refused(
    hosts: Any,
    registry: HookRegistry,
    settings: Settings,
    real_redis: redis.Redis,
    pair: signing.KeyPaths,
    namespace: str,
    tmp_path: Path,
) -> None:
    key = signing.load_signing_key(pair.signing)
    old = push(real_redis, settings, tmp_path, "one", key)
    new = push(real_redis, settings, tmp_path, "two", key)
    host = hosts(pair)
    host.start(real_redis)
    assert (host.version, ran(registry)) == (new, ["ran:two"])
    move_stamp_back(real_redis, namespace, old)
    assert host.check_now() is False
    assert (host.version, ran(registry)) == (new, ["ran:two"])
    refused = host.info()["refused"]
    assert refused["version"] == old
    assert "older" in refused["reason"] and "--rollback" in refused["reason"]


def test_a_rollback_signed_as_such_is_taken(
    hosts: Any,
    registry: HookRegistry,
    settings: Settings,
    real_redis: redis.Redis,
    pair: signing.KeyPaths,
    namespace: str,
    tmp_path: Path,
) -> None:
    key = signing.load_signing_key(pair.signing)
    old = push(real_redis, settings, tmp_path, "one", key)
    new = push(real_redis, settings, tmp_path, "two", key)
    host = hosts(pair)
    host.start(real_redis)
    assert host.version == new
    result = release.rollback(real_redis, settings, old, who="op", signing_key=key)
    assert (result.changed, result.version) == (True, old)
    meta = bundle_store.fetch_meta(real_redis, Keys.for_namespace(namespace), old)
    assert meta is not None and meta.rollback and meta.signature
    deadline = time.monotonic() + 5
    while host.version != old:  # the follower takes it at the announcement (or check_now)
        host.check_now()
        assert time.monotonic() < deadline, host.info()
        time.sleep(0.05)
    assert ran(registry) == ["ran:one"]


def test_a_history_cut_back_from_its_end_is_reported(
    settings: Settings,
    real_redis: redis.Redis,
    pair: signing.KeyPaths,
    namespace: str,
    real_redis_url: str,
    tmp_path: Path,
) -> None:
    key = signing.load_signing_key(pair.signing)
    push(real_redis, settings, tmp_path, "one", key)
    push(real_redis, settings, tmp_path, "two", key)
    assert history.verify_anchored(real_redis, namespace).ok
    (last_id, _), *_ = real_redis.xrevrange(hook_history(namespace), count=1)  # type: ignore[misc]
    real_redis.xdel(hook_history(namespace), last_id)
    assert history.verify(real_redis, namespace).ok  # the chain alone cannot see it
    report = history.verify_anchored(real_redis, namespace)
    assert not report.ok
    assert "removed from its end" in report.breaks[0]
    listed = hookbus(real_redis_url, namespace, "hooks", "history")
    assert listed.returncode == 1
    assert "removed from its end" in listed.stderr.replace("\n", " ")
    shown = hookbus(real_redis_url, namespace, "status")
    assert "HISTORY BROKEN" in shown.stdout


def test_a_restarted_verifying_worker_serves_the_last_bundle_it_verified(
    hosts: Any,
    registry: HookRegistry,
    settings: Settings,
    real_redis: redis.Redis,
    real_redis_url: str,
    pair: signing.KeyPaths,
    namespace: str,
    tmp_path: Path,
) -> None:
    key = signing.load_signing_key(pair.signing)
    good = push(real_redis, settings, tmp_path, "one", key)
    first = hosts(pair)
    first.start(real_redis)
    assert first.version == good
    first.stop()
    registry.replace_dynamic([], version=None)  # the process is gone: so are its hooks
    other = signing.generate_keys(tmp_path / "other")
    forged = push(real_redis, settings, tmp_path, "evil", signing.load_signing_key(other.signing))
    restarted = hosts(pair)
    restarted.start(real_redis)
    assert (restarted.version, ran(registry)) == (good, ["ran:one"])
    assert restarted.info()["refused"]["version"] == forged
    keys = Keys.for_namespace(namespace)
    Heartbeat(real_redis, keys, role="chain", interval_ms=1000, info=restarted.info).beat_now()
    time.sleep(0.05)
    shown = hookbus(real_redis_url, namespace, "status").stdout.replace("\n", " ")
    assert "REFUSED" in shown
    assert f"it serves bundle {good}" in shown
