"""The sandbox bounds what one agent hook run can take from the host, and its folder is
read-only to it: RAM through ``/dev`` and ``/dev/shm`` (tmpfs, not counted by
``RLIMIT_AS``), disk or RAM through its own folder, a handler rewritten for the next run, a
folder tree thousands deep left for the worker to clean up. Real bubblewrap runs, as this
(root) worker runs them and as an unprivileged worker does (its folder bound itself)."""

from __future__ import annotations

import os
from pathlib import Path

import fakeredis
import pytest

from hookbus.authoring import release
from hookbus.bundles import cache
from hookbus.bundles import store as bundle_store
from hookbus.bus.keys import Keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Decision, Event
from hookbus.hooks.actions import confine
from hookbus.hooks.actions.sandbox import Limits
from hookbus.hooks.manifest import parse_toml
from hookbus.hooks.registry import HookRegistry
from tests.reload_helpers import write_hook

MIB = 1024 * 1024
#: What a run may hold in /dev/shm and in its folder (the defaults of :class:`Limits`).
SHM_BOUND, FOLDER_BOUND = 16 * MIB, 64 * MIB

pytestmark = pytest.mark.skipif(
    not confine.sandbox_ready(), reason="no sandbox here: agent hooks are refused instead"
)


@pytest.fixture(params=["root worker", "unprivileged worker"])
def worker(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "unprivileged worker":
        # a worker that is not root runs its agents' hooks as itself, on its own cache
        monkeypatch.setattr(confine, "agent_ids", lambda: None)
    return str(request.param)


def plant_deep_tree(top: Path, depth: int) -> None:
    """``top/d/d/...`` ``depth`` levels deep (longer than a path may be: made level by level)."""
    fd = os.open(top, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)


def run_agent_hook(folder: Path, script: str) -> Decision:
    """Run ``script`` as an agent's hook from ``folder``; it reports by exiting 2 with its
    findings on stderr (the deny reason)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.sh").write_text(script)
    text = (
        'name = "h"\nevents = ["PreToolUse"]\nauthor = "agent:a1"\n'
        '[action.shell]\ncommand = "sh run.sh"\ntimeout_secs = 60\n'
    )
    registry = HookRegistry()
    registry.register_manifest(parse_toml(text, folder / "HOOK.toml"))
    return registry.run(Event(kind="PreToolUse", payload={}, agent_id="a1"))


def reported(decision: Decision) -> dict[str, str]:
    assert decision.outcome == "deny", decision.trace
    pairs = (line.split("=", 1) for line in (decision.reason or "").splitlines() if "=" in line)
    return {key.strip(): value.strip() for key, value in pairs}


def test_dev_shm_holds_at_most_its_bound_and_dev_is_read_only(tmp_path: Path, worker: str) -> None:
    script = (
        "cat >/dev/null\n"
        "i=0; while [ $i -lt 10 ]; do head -c 15728640 /dev/zero > /dev/shm/f$i 2>/dev/null;"
        " i=$((i+1)); done\n"
        'echo "shm_kib=$(du -sk /dev/shm | cut -f1)" >&2\n'
        'if touch /dev/planted 2>/dev/null; then echo "dev=writable" >&2; '
        'else echo "dev=read-only" >&2; fi\n'
        'echo "null=$(echo ok > /dev/null && echo writable)" >&2\n'
        "exit 2\n"
    )
    found = reported(run_agent_hook(tmp_path / "h", script))
    assert int(found["shm_kib"]) * 1024 <= SHM_BOUND == Limits().shm_bytes, found  # 150 MiB before
    assert found["dev"] == "read-only"
    assert found["null"] == "writable"  # the devices still work


def test_the_hook_folder_holds_at_most_its_bound(tmp_path: Path, worker: str) -> None:
    script = (
        "cat >/dev/null\n"
        "i=0; while [ $i -lt 12 ]; do head -c 10485760 /dev/zero > big$i 2>/dev/null;"
        " i=$((i+1)); done\n"
        'echo "hook_kib=$(du -sk /hook | cut -f1)" >&2\n'
        "exit 2\n"
    )
    folder = tmp_path / "h"
    found = reported(run_agent_hook(folder, script))
    # it took 120 MiB before
    assert int(found["hook_kib"]) * 1024 <= FOLDER_BOUND == Limits().hook_bytes, found
    assert not list(folder.glob("big*")), "the run wrote into the folder on the host"


def test_a_hook_cannot_rewrite_its_handler_for_the_next_run(tmp_path: Path, worker: str) -> None:
    script = (
        "cat >/dev/null\n"
        'echo "run=$(cat /hook/count 2>/dev/null || echo first)" >&2\n'
        "echo second > /hook/count\n"
        "printf 'cat >/dev/null\\nexit 0\\n' > /hook/run.sh\n"
        'if printf x >> /hook-src/run.sh 2>/dev/null; then echo "source=writable" >&2; '
        'else echo "source=read-only" >&2; fi\n'
        "exit 2\n"
    )
    folder = tmp_path / "h"
    first = reported(run_agent_hook(folder, script))
    again = reported(run_agent_hook(folder, script))
    assert first["run"] == "first" and first["source"] == "read-only"
    # the second run ran the approved handler, with nothing the first one wrote
    assert again["run"] == "first"
    assert (folder / "run.sh").read_text() == script
    assert not (folder / "count").exists()


def test_a_deep_tree_a_hook_builds_leaves_nothing_behind(tmp_path: Path, worker: str) -> None:
    script = (
        "cat >/dev/null\n"
        "p=/hook/t; i=0; while [ $i -lt 1800 ]; do p=$p/d; i=$((i+1)); done\n"
        'mkdir -p "$p" && echo "built=yes" >&2\n'
        "exit 2\n"
    )
    folder = tmp_path / "h"
    found = reported(run_agent_hook(folder, script))
    assert found["built"] == "yes"
    assert not (folder / "t").exists()


def test_a_cache_folder_thousands_deep_is_rewritten_not_a_crash(tmp_path: Path) -> None:
    client = fakeredis.FakeRedis()
    settings = Settings(namespace="deep")
    hooks = tmp_path / "hooks"
    write_hook(hooks, "h")
    version = release.release_folder(client, settings, hooks, signing_key=None).version
    bundle = bundle_store.fetch_bundle(client, Keys.for_namespace("deep"), version)
    root = tmp_path / "cache"
    folder = cache.materialise(bundle, root, private=False)
    (folder / "h").chmod(0o700)
    plant_deep_tree(folder / "h", 3000)  # what a hook given its cache writable could plant

    again = cache.materialise(bundle, root, private=False)  # RecursionError before

    assert again == folder
    assert cache.mismatches(again, bundle.files) == []
