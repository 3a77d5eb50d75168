"""HookHost on fakeredis: what a worker loads at start, how it follows bundles, what it
acks, and seed 000's stamp-file scenarios."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import fakeredis
import pytest

from hookbus.authoring import release
from hookbus.bundles import cache as bundle_cache
from hookbus.bundles import model as bundle_model
from hookbus.bundles import pack as bundle_pack
from hookbus.bundles import stamp
from hookbus.bundles import store as bundle_store
from hookbus.bus.keys import Keys
from hookbus.bus.settings.loader import ReloadSettings, Settings
from hookbus.bus.wire import Event, HookResult
from hookbus.hooks.registry import HookRegistry
from hookbus.workers.reload.hookset import HookHost
from tests.reload_helpers import write_broken_hook, write_hook


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(namespace="unithost", reload=ReloadSettings(data_dir=str(tmp_path / "data")))


@pytest.fixture
def hooks(tmp_path: Path) -> Path:
    root = tmp_path / "hooks"
    write_hook(root, "alpha")
    return root


@pytest.fixture
def registry() -> HookRegistry:
    reg = HookRegistry()
    reg.register(
        "static-guard",
        lambda event: HookResult(context=["ran:static"]),
        events=["PreToolUse"],
        priority=1,
    )
    return reg


@pytest.fixture
def host(
    registry: HookRegistry, settings: Settings, hooks: Path, tmp_path: Path
) -> Iterator[HookHost]:
    h = HookHost(registry, settings, hooks_dir=hooks, cache_dir=tmp_path / "cache")
    yield h
    h.stop()


def ran(registry: HookRegistry) -> list[str]:
    decision = registry.run(Event(kind="PreToolUse", payload={"tool_name": "Bash"}))
    return [c for c in decision.context if c.startswith("ran:")]


def start_without_thread(host: HookHost, client: fakeredis.FakeRedis) -> None:
    """Load as start() does, without the follower thread: tests call check_now()."""
    host._client = client
    host._initial_load(client)


def test_without_a_bundle_the_host_loads_its_hooks_dir_as_a_dir_version(
    host: HookHost, registry: HookRegistry, fake_redis: fakeredis.FakeRedis
) -> None:
    start_without_thread(host, fake_redis)
    assert host.version is not None and host.version.startswith("dir:")
    # what the whole process did (other tests' judge hooks, hung calls) is not this host's
    own = {k: v for k, v in host.info().items() if k not in ("judges", "hooks_at_cap")}
    assert own == {
        "version": host.version,
        "hooks": 1,
        "problems": [],
        "trust": "unsigned",
        "refused": None,
        "confinement": "unprobed",  # start() probes it; this test loads without start()
    }
    assert ran(registry) == ["ran:static", "ran:alpha"]
    assert registry.run(Event(kind="PreToolUse")).bundle_version == host.version


def test_with_a_stamp_the_host_loads_the_current_bundle_not_its_folder(
    host: HookHost,
    registry: HookRegistry,
    settings: Settings,
    fake_redis: fakeredis.FakeRedis,
    tmp_path: Path,
) -> None:
    other = tmp_path / "other"
    write_hook(other, "pushed")
    version = release.release_folder(fake_redis, settings, other).version
    start_without_thread(host, fake_redis)
    assert host.version == version
    assert ran(registry) == ["ran:static", "ran:pushed"]


def test_a_new_bundle_replaces_the_dynamic_hooks_and_static_hooks_survive(
    host: HookHost,
    registry: HookRegistry,
    settings: Settings,
    fake_redis: fakeredis.FakeRedis,
    hooks: Path,
) -> None:
    release.release_folder(fake_redis, settings, hooks)
    start_without_thread(host, fake_redis)
    (hooks / "alpha" / "HOOK.toml").unlink()
    (hooks / "alpha").rmdir()
    write_hook(hooks, "beta")
    new = release.release_folder(fake_redis, settings, hooks).version
    assert host.check_now() is True
    assert host.version == new
    assert ran(registry) == ["ran:static", "ran:beta"]
    assert registry.run(Event(kind="PreToolUse")).bundle_version == new
    assert host.check_now() is False, "nothing new: no second swap"


def test_listeners_are_told_after_each_swap(
    host: HookHost, settings: Settings, fake_redis: fakeredis.FakeRedis, hooks: Path
) -> None:
    seen: list[str | None] = []
    host.add_listener(lambda: seen.append(host.info()["version"]))
    start_without_thread(host, fake_redis)
    version = release.release_folder(fake_redis, settings, hooks).version
    host.check_now()
    assert seen[-1] == version
    assert len(seen) == 2


def test_a_tampered_bundle_is_refused_the_old_set_stays_and_the_ack_says_why(
    host: HookHost,
    registry: HookRegistry,
    settings: Settings,
    fake_redis: fakeredis.FakeRedis,
    hooks: Path,
) -> None:
    good = release.release_folder(fake_redis, settings, hooks).version
    start_without_thread(host, fake_redis)
    write_hook(hooks, "beta")
    bad = release.release_folder(fake_redis, settings, hooks).version
    keys = Keys.for_namespace(settings.namespace)
    fake_redis.hset(keys.bundle(bad), "files", b"\x90")  # an empty file list
    assert host.check_now() is False
    assert host.version == good
    assert any(bad in p and "refused" in p for p in host.info()["problems"])
    assert ran(registry) == ["ran:static", "ran:alpha"]
    assert host.check_now() is False, "a refused version is not fetched again every second"


def test_a_hook_whose_requirements_fail_on_this_worker_is_skipped_and_reported(
    host: HookHost,
    registry: HookRegistry,
    settings: Settings,
    fake_redis: fakeredis.FakeRedis,
    hooks: Path,
) -> None:
    folder = write_hook(hooks, "needs-tool")
    manifest = folder / "HOOK.toml"
    manifest.write_text(
        manifest.read_text().replace(
            "[action.prompt_inject]",
            '[requires]\nbins = ["no-such-binary-hookbus"]\n[action.prompt_inject]',
        )
    )
    release.release_folder(fake_redis, settings, hooks)
    start_without_thread(host, fake_redis)
    info = host.info()
    assert info["hooks"] == 1
    assert any("no-such-binary-hookbus" in p for p in info["problems"])
    assert ran(registry) == ["ran:static", "ran:alpha"]


def test_the_follower_thread_picks_up_a_push_on_its_own(
    host: HookHost, settings: Settings, fake_redis: fakeredis.FakeRedis, hooks: Path
) -> None:
    host.start(fake_redis)
    write_hook(hooks, "beta")
    version = release.release_folder(fake_redis, settings, hooks).version
    deadline = time.monotonic() + 3
    while host.version != version and time.monotonic() < deadline:
        time.sleep(0.01)
    assert host.version == version


# --- seed 000: the single-host stamp file ----------------------------------------------


def test_seed000_a_stamp_file_reloads_the_folder_and_is_handled_once(
    host: HookHost,
    registry: HookRegistry,
    settings: Settings,
    fake_redis: fakeredis.FakeRedis,
    hooks: Path,
) -> None:
    start_without_thread(host, fake_redis)
    write_hook(hooks, "beta")
    stamp.write_stamp_file(settings, "from-cli")
    assert host.check_now() is True
    assert ran(registry) == ["ran:static", "ran:alpha", "ran:beta"]
    assert host.check_now() is False, "the same stamp is not handled twice"


def test_seed000_without_a_stamp_file_nothing_reloads(
    host: HookHost, registry: HookRegistry, fake_redis: fakeredis.FakeRedis, hooks: Path
) -> None:
    start_without_thread(host, fake_redis)
    before = host.version
    write_hook(hooks, "beta")
    assert host.check_now() is False
    assert host.version == before
    assert ran(registry) == ["ran:static", "ran:alpha"]


def test_seed000_a_broken_manifest_warns_and_the_rest_of_the_hooks_load(
    host: HookHost,
    registry: HookRegistry,
    settings: Settings,
    fake_redis: fakeredis.FakeRedis,
    hooks: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    start_without_thread(host, fake_redis)
    write_broken_hook(hooks, "broken")
    write_hook(hooks, "beta")
    stamp.write_stamp_file(settings, "from-cli")
    with caplog.at_level(logging.WARNING, logger="hookbus.workers.reload.hookset"):
        assert host.check_now() is True
    assert any("broken" in r.getMessage() for r in caplog.records)
    assert ran(registry) == ["ran:static", "ran:alpha", "ran:beta"]
    assert any("broken" in p for p in host.info()["problems"])


def test_problems_of_a_bundle_name_files_relative_to_the_bundle(
    host: HookHost, settings: Settings, fake_redis: fakeredis.FakeRedis, hooks: Path
) -> None:
    # a bundle an older pusher stored with a broken hook in it (today's release refuses it)
    write_broken_hook(hooks, "broken")
    files = bundle_pack.collect_files(hooks, max_bytes=10**6)
    bundle_store.store_and_announce(
        fake_redis,
        settings,
        files,
        who="old",
        source=hooks,
        hooks=["alpha"],
        problems=[],
        audit=bundle_model.AuditSummary(),
    )
    start_without_thread(host, fake_redis)
    (problem,) = host.info()["problems"]
    assert problem.startswith("broken/HOOK.toml: ")


def test_without_a_data_dir_bundles_are_cached_in_the_users_cache_folder(
    registry: HookRegistry, fake_redis: fakeredis.FakeRedis, hooks: Path
) -> None:
    import uuid

    settings = Settings(namespace=f"unit-{uuid.uuid4().hex[:8]}")
    host = HookHost(registry, settings, hooks_dir=None)
    cache = bundle_cache.default_cache_root(settings)
    try:
        version = release.release_folder(fake_redis, settings, hooks).version
        start_without_thread(host, fake_redis)
        assert host.version == version
        meta = bundle_store.fetch_meta(fake_redis, Keys.for_namespace(settings.namespace), version)
        assert meta is not None
        assert (cache / meta.content_hash / "alpha" / "HOOK.toml").is_file()
        assert cache.stat().st_mode & 0o777 == 0o700
    finally:
        bundle_cache.remove_tree(cache)


def test_redis_trouble_while_fetching_is_retried_at_the_next_check(
    host: HookHost,
    settings: Settings,
    fake_redis: fakeredis.FakeRedis,
    hooks: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hookbus.errors import RedisUnavailable

    start_without_thread(host, fake_redis)
    version = release.release_folder(fake_redis, settings, hooks).version
    real_fetch = bundle_store.fetch_bundle
    calls = []

    def flaky(*args: object, **kwargs: object) -> bundle_model.Bundle:
        calls.append(1)
        if len(calls) == 1:
            raise RedisUnavailable("redis://x", "connection reset")
        return real_fetch(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(bundle_store, "fetch_bundle", flaky)
    assert host.check_now() is False
    assert host.info()["problems"] == []
    assert host.check_now() is True
    assert host.version == version


def test_a_host_with_neither_bundle_nor_folder_warns_that_it_has_no_hooks(
    registry: HookRegistry,
    settings: Settings,
    tmp_path: Path,
    fake_redis: fakeredis.FakeRedis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    host = HookHost(registry, settings, hooks_dir=None, cache_dir=tmp_path / "cache")
    with caplog.at_level("WARNING", logger="hookbus.workers.reload.hookset"):
        start_without_thread(host, fake_redis)
    assert "no hooks loaded" in caplog.text
    assert "hookbus reload" in caplog.text


def test_a_host_with_its_folder_does_not_warn(
    host: HookHost, fake_redis: fakeredis.FakeRedis, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("WARNING", logger="hookbus.workers.reload.hookset"):
        start_without_thread(host, fake_redis)
    assert "no hooks loaded" not in caplog.text


def test_a_missing_hooks_folder_is_named_in_the_warning(
    registry: HookRegistry,
    settings: Settings,
    tmp_path: Path,
    fake_redis: fakeredis.FakeRedis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    missing = tmp_path / "nope"
    host = HookHost(registry, settings, hooks_dir=missing, cache_dir=tmp_path / "cache")
    with caplog.at_level("WARNING", logger="hookbus.workers.reload.hookset"):
        start_without_thread(host, fake_redis)
    assert f"the hooks folder {missing} could not be loaded" in caplog.text
    assert "keeping None" not in caplog.text
