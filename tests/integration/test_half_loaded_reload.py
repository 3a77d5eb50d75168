"""A reload that one worker cannot fully load is a failed reload, never a quiet partial one.

Two real chain workers (``hookbus worker --role chain``) share one namespace; a policy hook's
module imports a library that only the first worker's environment holds. The second worker
must not answer from the set without that hook as if it were the set the bundle declares: it
keeps the complete set it runs (refusing the new one), or, with none to keep, answers the
hook's kinds by their failure policy, flagged degraded. ``reload --wait`` exits non-zero and
names the worker and the hook, at once rather than at the end of its wait. A shell hook whose
script lacks its run bit is caught by ``validate`` and refused by ``reload``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from hookbus import HookBus
from hookbus.bus.keys import Keys
from hookbus.bus.wire import Event
from hookbus.workers.fleet.heartbeat import WorkerInfo, list_workers
from tests.reload_helpers import write_hook, write_shell_hook
from tests.wiped_helpers import ROOT, chain_worker_cli

#: A policy hook denying ``rm -rf``, whose module needs a library only one worker has.
POLICY_MODULE = """\
import only_on_one_worker

def check(event):
    command = str((event.payload.get("tool_input") or {}).get("command", ""))
    if only_on_one_worker.dangerous(command):
        return {"outcome": "deny", "reason": "no rm -rf"}
    return None
"""
LIBRARY = "def dangerous(command):\n    return command.startswith('rm -rf')\n"


def write_policy_hook(root: Path) -> None:
    folder = root / "no-rm"
    folder.mkdir(parents=True)
    (folder / "no_rm.py").write_text(POLICY_MODULE)
    (folder / "HOOK.toml").write_text(
        'name = "no-rm"\nevents = ["PreToolUse"]\n[action.python]\nentrypoint = "no_rm:check"\n'
    )


def rm_rf() -> Event:
    return Event(
        kind="PreToolUse", payload={"tool_name": "Bash", "tool_input": {"command": "rm -rf /srv"}}
    )


def hookbus_cli(url: str, ns: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env.update(HOOKBUS_REDIS_URL=url, HOOKBUS_NAMESPACE=ns, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "hookbus", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def beat_of(client: redis.Redis, ns: str, pid: int) -> WorkerInfo:
    (beat,) = [w for w in list_workers(client, Keys.for_namespace(ns)) if w.pid == pid]
    return beat


def wait_for_version(client: redis.Redis, ns: str, pid: int, version: str) -> WorkerInfo:
    end = time.monotonic() + 20
    while (beat := beat_of(client, ns, pid)).version != version:
        assert time.monotonic() < end, f"worker {pid} runs {beat.version}, not {version}"
        time.sleep(0.05)
    return beat


def current_version(client: redis.Redis, ns: str) -> str:
    raw = client.get(Keys.for_namespace(ns).bundle_stamp)
    assert raw is not None
    return raw.decode() if isinstance(raw, bytes) else str(raw)


@dataclass
class HalfFleet:
    """Two chain workers on bundle ``v1`` of ``hooks``: ``a`` can import the policy hook's
    library, ``b`` (logging to ``b_log``) cannot."""

    url: str
    namespace: str
    hooks: Path
    v1: str
    a: subprocess.Popen[bytes]
    b: subprocess.Popen[bytes]
    b_log: Path

    def reload(self, *args: str) -> subprocess.CompletedProcess[str]:
        return hookbus_cli(self.url, self.namespace, "reload", "--dir", str(self.hooks), *args)


@pytest.fixture
def half_fleet(
    tmp_path: Path, real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> Iterator[HalfFleet]:
    library = tmp_path / "lib"
    library.mkdir()
    (library / "only_on_one_worker.py").write_text(LIBRARY)
    hooks = tmp_path / "hooks"
    write_hook(hooks, "annotate")
    first = hookbus_cli(real_redis_url, namespace, "reload", "--dir", str(hooks))
    assert first.returncode == 0, first.stderr
    v1 = current_version(real_redis, namespace)
    has_it = {"PYTHONPATH": f"{ROOT}{os.pathsep}{library}"}
    with (
        chain_worker_cli(real_redis_url, namespace, tmp_path, name="a", env=has_it) as (_, a),
        chain_worker_cli(real_redis_url, namespace, tmp_path, name="b") as (b_log, b),
    ):
        wait_for_version(real_redis, namespace, a.pid, v1)
        wait_for_version(real_redis, namespace, b.pid, v1)
        yield HalfFleet(real_redis_url, namespace, hooks, v1, a, b, b_log)


def test_a_worker_that_cannot_import_a_new_policy_hook_keeps_its_set_and_reload_fails(
    half_fleet: HalfFleet, real_redis: redis.Redis, namespace: str
) -> None:
    fleet = half_fleet
    write_policy_hook(fleet.hooks)
    started = time.monotonic()
    out = fleet.reload("--wait", "20")
    waited = time.monotonic() - started
    v2 = current_version(real_redis, namespace)
    b_beat = beat_of(real_redis, namespace, fleet.b.pid)

    assert v2 != fleet.v1
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"{b_beat.id} (chain@" in out.stderr and "refused it" in out.stderr, out.stderr
    assert "no-rm cannot be loaded on this worker" in out.stderr, out.stderr
    assert "only_on_one_worker" in out.stderr, out.stderr
    assert waited < 15, f"reload --wait ran {waited:.1f} s: a refusal answers at once"
    # the worker that could not import it keeps the complete set it ran, and says so
    assert b_beat.version == fleet.v1
    assert b_beat.extra["refused"]["version"] == v2
    wait_for_version(real_redis, namespace, fleet.a.pid, v2)
    status = hookbus_cli(fleet.url, namespace, "status")
    assert f"REFUSED: {b_beat.id} refused bundle {v2}" in status.stdout, status.stdout

    bus = HookBus.from_url(fleet.url, namespace)
    try:
        answers = [bus.request(rm_rf(), deadline_ms=5000) for _ in range(30)]
    finally:
        bus.close()
    by_b = [d for d in answers if d.worker and d.worker.startswith(b_beat.id)]
    by_a = [d for d in answers if d not in by_b]
    # no answer came from a set lacking the new hook while naming the new set: the worker
    # that has it denies by it, the one that refused it answers from its old set, by name
    assert by_a and all(
        (d.outcome, d.degraded, d.bundle_version) == ("deny", False, v2) for d in by_a
    )
    assert all(d.bundle_version == fleet.v1 for d in by_b), [d.bundle_version for d in by_b]
    assert "no-rm cannot be loaded on this worker" in fleet.b_log.read_text()


def test_taking_the_unloadable_hook_out_again_is_a_clean_reload_on_every_worker(
    half_fleet: HalfFleet, real_redis: redis.Redis, namespace: str
) -> None:
    """The revert names the set the refusing worker kept running: it must stop reporting
    the refusal of a bundle nobody asks it to run any more."""
    fleet = half_fleet
    write_policy_hook(fleet.hooks)
    half = fleet.reload("--wait", "20")
    assert half.returncode == 1, half.stdout + half.stderr
    (fleet.hooks / "no-rm" / "no_rm.py").unlink()
    (fleet.hooks / "no-rm" / "HOOK.toml").unlink()
    (fleet.hooks / "no-rm").rmdir()
    back = fleet.reload("--wait", "20")

    assert current_version(real_redis, namespace) == fleet.v1
    assert back.returncode == 0, back.stdout + back.stderr
    assert beat_of(real_redis, namespace, fleet.b.pid).problems == []


def test_a_worker_with_no_complete_set_answers_the_hooks_kinds_by_policy_degraded(
    tmp_path: Path, real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    hooks = tmp_path / "hooks"
    write_hook(hooks, "annotate", events=("PreToolUse", "PromptSubmit"))
    write_policy_hook(hooks)
    pushed = hookbus_cli(real_redis_url, namespace, "reload", "--dir", str(hooks))
    assert pushed.returncode == 0, pushed.stderr
    version = current_version(real_redis, namespace)
    with chain_worker_cli(real_redis_url, namespace, tmp_path, name="b") as (_, b):
        beat = wait_for_version(real_redis, namespace, b.pid, version)
        bus = HookBus.from_url(real_redis_url, namespace)
        try:
            tools = [bus.request(rm_rf(), deadline_ms=5000) for _ in range(20)]
            prompt = bus.request(
                Event(kind="PromptSubmit", payload={"prompt": "hi"}), deadline_ms=5000
            )
        finally:
            bus.close()
    assert [(d.outcome, d.degraded) for d in tools] == [("deny", True)] * 20, tools[0]
    assert "a hook deciding PreToolUse could not be loaded on this worker" in (
        tools[0].reason or ""
    )
    # the kinds the missing hook did not decide are answered by the chain as usual
    assert (prompt.outcome, prompt.degraded, prompt.context) == ("allow", False, ["ran:annotate"])
    assert beat.extra.get("missing_kinds") == ["PreToolUse"]
    assert beat.extra.get("healthy") is False


def test_a_script_without_its_run_bit_fails_validate_and_is_refused_by_reload(
    tmp_path: Path, real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    hooks = tmp_path / "hooks"
    folder = write_shell_hook(hooks, "deny-all", "exit 2")
    (folder / "run.sh").chmod(0o644)

    validated = hookbus_cli(real_redis_url, namespace, "hooks", "validate", str(hooks))
    pushed = hookbus_cli(real_redis_url, namespace, "reload", "--dir", str(hooks))

    assert validated.returncode == 1, validated.stdout
    assert "run.sh is not executable" in validated.stdout + validated.stderr
    assert pushed.returncode != 0, pushed.stdout
    assert "run.sh is not executable" in pushed.stderr
    assert real_redis.get(Keys.for_namespace(namespace).bundle_stamp) is None
