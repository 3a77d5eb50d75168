"""Issue 12 row 12: a reload runs the new code of python hooks and leaves ``sys.path`` as it
was. Before, a package hook (``pkg.rules:check``) and a single-file hook's sibling module
(``import helper``) stayed in ``sys.modules`` across reloads, so the old code kept
answering, and every bundle folder was added to ``sys.path`` for good."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from hookbus.authoring import release
from hookbus.bus.connection import connect
from hookbus.bus.settings.loader import ReloadSettings, Settings
from hookbus.bus.wire import Event
from hookbus.hooks.registry import HookRegistry
from hookbus.workers.reload.hookset import HookHost

pytestmark = pytest.mark.integration


def _write(root: Path, word: str) -> None:
    """Two hooks whose answers carry ``word``: one from a package, one from a sibling."""
    pkg_hook = root / "pkghook"
    (pkg_hook / "rulespkg").mkdir(parents=True, exist_ok=True)
    (pkg_hook / "rulespkg" / "__init__.py").write_text("")
    (pkg_hook / "rulespkg" / "rules.py").write_text(
        f"def check(event):\n    return {{'context': ['pkg {word}']}}\n"
    )
    (pkg_hook / "HOOK.toml").write_text(
        'name = "pkghook"\nevents = ["PreToolUse"]\npriority = 1\n'
        '[action.python]\nentrypoint = "rulespkg.rules:check"\n'
    )
    file_hook = root / "filehook"
    file_hook.mkdir(parents=True, exist_ok=True)
    (file_hook / "helper.py").write_text(f"WORD = 'helper {word}'\n")
    (file_hook / "filehook_mod.py").write_text(
        "import helper\n\ndef check(event):\n    return {'context': [helper.WORD]}\n"
    )
    (file_hook / "HOOK.toml").write_text(
        'name = "filehook"\nevents = ["PreToolUse"]\npriority = 2\n'
        '[action.python]\nentrypoint = "filehook_mod:check"\n'
    )


def _wait_for(host: HookHost, version: str) -> None:
    end = time.monotonic() + 10
    while host.version != version:
        assert time.monotonic() < end, f"still on {host.version}"
        time.sleep(0.02)


def test_a_reload_runs_the_new_python_code_and_leaves_sys_path_alone(
    real_redis_url: str, namespace: str, tmp_path: Path
) -> None:
    settings = Settings(
        redis_url=real_redis_url,
        namespace=namespace,
        reload=ReloadSettings(data_dir=str(tmp_path / "d")),
    )
    client = connect(real_redis_url)
    registry = HookRegistry.from_settings(settings)
    host = HookHost(registry, settings, hooks_dir=None, cache_dir=tmp_path / "cache")
    hooks = tmp_path / "hooks"
    path_before = list(sys.path)
    try:
        host.start(client)
        for word in ("v1", "v2", "v3"):
            _write(hooks, word)
            version = release.release_folder(client, settings, hooks).version
            _wait_for(host, version)
            assert host.info()["problems"] == []
            decision = registry.run(Event(kind="PreToolUse"), time_left_s=2.0)
            assert decision.context == [f"pkg {word}", f"helper {word}"], decision.trace
            assert sys.path == path_before
    finally:
        host.stop()
        client.close()
