"""Bundles on fakeredis: packing, content addressing, history, rollback, pruning, checks."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fakeredis
import msgspec
import pytest

from hookbus.authoring import release
from hookbus.bundles import cache as bundle_cache
from hookbus.bundles import stamp
from hookbus.bundles import store as bundle_store
from hookbus.bus.keys import Keys
from hookbus.bus.settings.loader import ReloadSettings, Settings
from hookbus.errors import BundleError, SecurityViolation
from tests.reload_helpers import write_broken_hook, write_hook, write_shell_hook


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(namespace="unitreload", reload=ReloadSettings(bundle_history=3))


@pytest.fixture
def keys(settings: Settings) -> Keys:
    return Keys.for_namespace(settings.namespace)


@pytest.fixture
def hooks(tmp_path: Path) -> Path:
    root = tmp_path / "hooks"
    write_hook(root, "alpha")
    write_hook(root, "beta", priority=5)
    return root


def test_pushing_a_folder_stores_the_bundle_sets_the_stamp_and_announces_it(
    fake_redis: fakeredis.FakeRedis, settings: Settings, keys: Keys, hooks: Path
) -> None:
    sub = fake_redis.pubsub()
    sub.subscribe(keys.reload_channel)
    result = release.release_folder(fake_redis, settings, hooks, who="tester")
    assert result.changed
    assert result.hooks == ["alpha", "beta"]
    assert fake_redis.get(keys.bundle_stamp) == result.version.encode()
    assert fake_redis.zscore(keys.bundle_history, result.version) is not None
    fetched = bundle_store.fetch_bundle(fake_redis, keys, result.version)
    assert fetched.meta.who == "tester"
    assert sorted(f.path for f in fetched.files) == ["alpha/HOOK.toml", "beta/HOOK.toml"]
    messages = [sub.get_message(timeout=0.1) for _ in range(3)]
    published = [m["data"] for m in messages if m and m["type"] == "message"]
    assert published == [result.version.encode()]


def test_pushing_unchanged_content_is_a_no_op_that_says_so(
    fake_redis: fakeredis.FakeRedis, settings: Settings, keys: Keys, hooks: Path
) -> None:
    first = release.release_folder(fake_redis, settings, hooks)
    second = release.release_folder(fake_redis, settings, hooks)
    assert not second.changed
    assert second.version == first.version
    assert fake_redis.zcard(keys.bundle_history) == 1


def test_the_version_is_the_content_hash_so_any_change_makes_a_new_version(
    fake_redis: fakeredis.FakeRedis, settings: Settings, hooks: Path
) -> None:
    first = release.release_folder(fake_redis, settings, hooks)
    write_hook(hooks, "gamma")
    second = release.release_folder(fake_redis, settings, hooks)
    assert second.changed
    assert second.version != first.version
    assert second.previous == first.version
    os.chmod(hooks / "gamma" / "HOOK.toml", 0o755)
    third = release.release_folder(fake_redis, settings, hooks)
    assert third.version != second.version, "the executable bit is part of the content"


def test_a_symlink_in_the_folder_refuses_the_bundle_and_stores_nothing(
    fake_redis: fakeredis.FakeRedis, settings: Settings, keys: Keys, hooks: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    os.symlink(outside, hooks / "alpha" / "link.txt")
    with pytest.raises(BundleError, match="symlink"):
        release.release_folder(fake_redis, settings, hooks)
    assert fake_redis.get(keys.bundle_stamp) is None


def test_a_folder_over_the_size_limit_is_refused(
    fake_redis: fakeredis.FakeRedis, hooks: Path
) -> None:
    small = Settings(namespace="unitreload", reload=ReloadSettings(max_bundle_bytes=100))
    (hooks / "alpha" / "big.bin").write_bytes(b"x" * 200)
    with pytest.raises(BundleError, match="max_bundle_bytes"):
        release.release_folder(fake_redis, small, hooks)


def test_with_allow_partial_a_broken_hook_is_left_out_and_the_others_are_published(
    fake_redis: fakeredis.FakeRedis, settings: Settings, keys: Keys, hooks: Path
) -> None:
    write_broken_hook(hooks, "broken")
    result = release.release_folder(fake_redis, settings, hooks, allow_partial=True)
    assert result.changed
    assert result.hooks == ["alpha", "beta"]
    assert result.left_out == ["broken"]
    assert any("broken" in p for p in result.problems)
    bundle = bundle_store.fetch_bundle(fake_redis, keys, result.version)
    assert not any(f.path.startswith("broken/") for f in bundle.files)


def test_a_folder_with_a_broken_hook_is_refused_by_default(
    fake_redis: fakeredis.FakeRedis, settings: Settings, keys: Keys, hooks: Path
) -> None:
    write_broken_hook(hooks, "broken")
    with pytest.raises(BundleError, match="nothing was published") as refused:
        release.release_folder(fake_redis, settings, hooks)
    assert "hook broken: " in str(refused.value)
    assert fake_redis.get(keys.bundle_stamp) is None


@dataclass
class _Finding:
    rule: str
    severity: str
    file: str
    line: int | None
    message: str


@dataclass
class _Report:
    findings: list[_Finding] = field(default_factory=list)

    @property
    def critical(self) -> list[_Finding]:
        return [f for f in self.findings if f.severity == "critical"]


def _fake_audit(monkeypatch: pytest.MonkeyPatch, findings: list[_Finding]) -> None:
    def audit_folder(hooks_dir: Path, *, settings: Settings) -> _Report:
        return _Report(list(findings))

    monkeypatch.setattr(release, "audit_folder", audit_folder)


def test_a_critical_audit_finding_refuses_the_bundle_and_the_stamp_stays(
    fake_redis: fakeredis.FakeRedis,
    settings: Settings,
    keys: Keys,
    hooks: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = release.release_folder(fake_redis, settings, hooks)
    write_hook(hooks, "evil")
    _fake_audit(monkeypatch, [_Finding("reverse-shell", "critical", "evil/run.sh", 3, "nc -e")])
    with pytest.raises(SecurityViolation, match="critical") as caught:
        release.release_folder(fake_redis, settings, hooks)
    assert caught.value.findings
    assert fake_redis.get(keys.bundle_stamp) == first.version.encode()


def test_non_critical_audit_findings_travel_in_the_bundle(
    fake_redis: fakeredis.FakeRedis,
    settings: Settings,
    keys: Keys,
    hooks: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _fake_audit(monkeypatch, [_Finding("http-plain", "medium", "alpha/HOOK.toml", None, "http")])
    result = release.release_folder(fake_redis, settings, hooks)
    meta = bundle_store.fetch_bundle(fake_redis, keys, result.version).meta
    assert meta.audit.ran
    assert meta.audit.critical == 0
    assert meta.audit.findings == ["medium http-plain alpha/HOOK.toml: http"]


def _tamper(client: fakeredis.FakeRedis, keys: Keys, version: str, **changes: Any) -> None:
    raw_meta = client.hget(keys.bundle(version), "meta")
    raw_files = client.hget(keys.bundle(version), "files")
    assert raw_meta is not None and raw_files is not None
    meta = msgspec.json.decode(raw_meta)
    files = msgspec.msgpack.decode(raw_files)
    if "data" in changes:
        files[0]["data"] = changes["data"]
    if "path" in changes:
        files[0]["path"] = changes["path"]
    if "audit" in changes:
        meta["audit"] = changes["audit"]
    client.hset(keys.bundle(version), "meta", msgspec.json.encode(meta))
    client.hset(keys.bundle(version), "files", msgspec.msgpack.encode(files))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"data": b"name = 'x'"}, "does not match its hash"),
        ({"path": "../escape.toml"}, "escapes"),
        ({"path": "/etc/escape.toml"}, "escapes"),
        ({"audit": {"ran": True, "critical": 0, "findings": ["edited"]}}, "seal"),
    ],
)
def test_a_tampered_bundle_entry_is_refused_on_fetch(
    fake_redis: fakeredis.FakeRedis,
    settings: Settings,
    keys: Keys,
    hooks: Path,
    change: dict[str, Any],
    message: str,
) -> None:
    version = release.release_folder(fake_redis, settings, hooks).version
    _tamper(fake_redis, keys, version, **change)
    with pytest.raises(BundleError, match=message):
        bundle_store.fetch_bundle(fake_redis, keys, version)


def test_materialised_files_keep_their_executable_bit(
    fake_redis: fakeredis.FakeRedis, settings: Settings, keys: Keys, hooks: Path, tmp_path: Path
) -> None:
    write_shell_hook(hooks, "shelly", "exit 0")
    version = release.release_folder(fake_redis, settings, hooks).version
    bundle = bundle_store.fetch_bundle(fake_redis, keys, version)
    folder = bundle_cache.materialise(bundle, tmp_path / "cache")
    assert folder == tmp_path / "cache" / bundle.meta.content_hash
    assert os.access(folder / "shelly" / "run.sh", os.X_OK)
    assert not os.access(folder / "alpha" / "HOOK.toml", os.X_OK)
    assert (folder / "alpha" / "HOOK.toml").read_bytes() == (
        hooks / "alpha" / "HOOK.toml"
    ).read_bytes()
    again = bundle_cache.materialise(bundle, tmp_path / "cache")
    assert again == folder


def test_rollback_without_a_version_makes_the_previous_bundle_current(
    fake_redis: fakeredis.FakeRedis, settings: Settings, keys: Keys, hooks: Path
) -> None:
    first = release.release_folder(fake_redis, settings, hooks)
    write_hook(hooks, "gamma")
    second = release.release_folder(fake_redis, settings, hooks)
    back = bundle_store.rollback(fake_redis, settings)
    assert back.changed
    assert back.version == first.version
    assert back.previous == second.version
    assert fake_redis.get(keys.bundle_stamp) == first.version.encode()
    forward = bundle_store.rollback(fake_redis, settings, second.version)
    assert forward.version == second.version


def test_rollback_to_an_unknown_version_says_how_to_find_one(
    fake_redis: fakeredis.FakeRedis, settings: Settings, hooks: Path
) -> None:
    release.release_folder(fake_redis, settings, hooks)
    with pytest.raises(BundleError, match="reload --list"):
        bundle_store.rollback(fake_redis, settings, "000000000000")


def test_rollback_with_no_history_is_an_error(
    fake_redis: fakeredis.FakeRedis, settings: Settings
) -> None:
    with pytest.raises(BundleError, match="no earlier bundle"):
        bundle_store.rollback(fake_redis, settings)


def test_bundles_beyond_the_history_count_are_pruned_but_never_the_current(
    fake_redis: fakeredis.FakeRedis, settings: Settings, keys: Keys, hooks: Path
) -> None:
    versions = []
    for i in range(5):
        write_hook(hooks, f"h{i}")
        versions.append(release.release_folder(fake_redis, settings, hooks).version)
    kept = [e.version for e in bundle_store.history(fake_redis, keys)]
    assert kept == list(reversed(versions[-3:]))
    assert not fake_redis.exists(keys.bundle(versions[0]))
    assert fake_redis.exists(keys.bundle(versions[-1]))
    assert bundle_store.history(fake_redis, keys)[0].current


def test_the_stamp_file_is_written_only_when_a_data_dir_is_configured(
    fake_redis: fakeredis.FakeRedis, hooks: Path, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    with_dir = Settings(namespace="unitreload", reload=ReloadSettings(data_dir=str(data_dir)))
    result = release.release_folder(fake_redis, with_dir, hooks)
    seen = stamp.read_stamp_file(data_dir / stamp.STAMP_FILENAME)
    assert seen is not None and seen[1] == result.version
    assert stamp.stamp_file_path(Settings()) is None


def test_history_entries_carry_who_pushed_and_the_hook_count(
    fake_redis: fakeredis.FakeRedis, settings: Settings, keys: Keys, hooks: Path
) -> None:
    release.release_folder(fake_redis, settings, hooks, who="ana")
    (entry,) = bundle_store.history(fake_redis, keys)
    assert entry.meta is not None
    assert entry.meta.who == "ana"
    assert entry.meta.hook_count == 2
    assert entry.meta.content_hash.startswith(entry.version)


def test_a_cache_folder_other_users_can_write_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    (shared / "bundles").mkdir(parents=True)
    os.chmod(shared, 0o777)
    with pytest.raises(BundleError, match="writable by other users"):
        bundle_cache.check_private(shared / "bundles")
    os.chmod(shared, 0o700)
    bundle_cache.check_private(shared / "bundles")


def test_the_default_cache_is_in_the_users_cache_folder_not_the_shared_temp_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    root = bundle_cache.default_cache_root(Settings(namespace="ns1"))
    assert root == tmp_path / "xdg" / "hookbus" / "bundles" / "ns1"
    monkeypatch.delenv("XDG_CACHE_HOME")
    root = bundle_cache.default_cache_root(Settings(namespace="ns1"))
    assert root == Path.home() / ".cache" / "hookbus" / "bundles" / "ns1"
    assert not root.is_relative_to(tempfile.gettempdir())
    configured = Settings(namespace="ns1", reload=ReloadSettings(data_dir=str(tmp_path)))
    assert bundle_cache.default_cache_root(configured) == tmp_path / "bundles" / "ns1"


def test_a_stamp_file_that_cannot_be_written_is_a_warning_not_a_failed_push(
    fake_redis: fakeredis.FakeRedis,
    keys: Keys,
    hooks: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    settings = Settings(namespace="unitreload", reload=ReloadSettings(data_dir=str(not_a_dir)))
    result = release.release_folder(fake_redis, settings, hooks)
    assert result.changed
    assert fake_redis.get(keys.bundle_stamp) == result.version.encode()
    assert any("stamp file not written" in r.getMessage() for r in caplog.records)
