"""HookHost against servers that go away: its subscriber and stamp poll recover by themselves."""

from __future__ import annotations

import time
from pathlib import Path

from hookbus.authoring import release
from hookbus.bus.connection import connect
from hookbus.bus.embedded import EmbeddedServer, free_port
from hookbus.bus.settings.loader import ReloadSettings, Settings
from hookbus.hooks.registry import HookRegistry
from hookbus.workers.reload.hookset import HookHost
from tests.reload_helpers import write_hook


def wait_for_version(host: HookHost, version: str, timeout_s: float) -> float:
    """Seconds until ``host`` runs ``version``; fails after ``timeout_s``."""
    started = time.monotonic()
    while host.version != version:
        assert time.monotonic() - started < timeout_s, f"still on {host.version}"
        time.sleep(0.02)
    return time.monotonic() - started


def test_a_host_follows_reloads_across_a_server_restart(tmp_path: Path) -> None:
    port = free_port()
    hooks = tmp_path / "hooks"
    write_hook(hooks, "alpha")
    first = EmbeddedServer(port=port)
    url = first.start()
    settings = Settings(
        redis_url=url, namespace="restart", reload=ReloadSettings(data_dir=str(tmp_path / "d"))
    )
    client = connect(url)
    host = HookHost(HookRegistry(), settings, hooks_dir=None, cache_dir=tmp_path / "cache")
    second: EmbeddedServer | None = None
    try:
        host.start(client)
        assert host.version is None, "no bundle and no folder: nothing loaded"
        v1 = release.release_folder(client, settings, hooks).version
        wait_for_version(host, v1, timeout_s=2)
        first.stop()
        time.sleep(0.3)  # the subscriber notices and starts backing off
        second = EmbeddedServer(port=port)
        second.start()
        write_hook(hooks, "beta")
        v2 = release.release_folder(client, settings, hooks).version
        took = wait_for_version(host, v2, timeout_s=6)
        assert host.info()["hooks"] == 2
        assert took < 6
    finally:
        host.stop()
        first.stop()
        if second is not None:
            second.stop()
