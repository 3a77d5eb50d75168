"""A hook that kills one worker's process costs the requests it held no degraded answer while
another worker lives: that worker takes them over within the request's deadline.

Two real ``hookbus worker --role chain`` processes share a namespace; a python hook calls
``os._exit(1)`` on the first one only (its environment says so). The first worker's
supervisor sees its child die, tombstones the child's lease and announces the death; the
second worker's reclaimer takes the request over at once and runs it through its own hooks.
Left to the leases alone, the takeover came on the second reclaim pass, 0.5-1 s after the
death: past a half-second deadline every time.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis

from hookbus import HookBus
from hookbus.bus.wire import Decision, Event
from tests.wiped_helpers import chain_worker_cli

#: The deadline of every request (ms): shorter than two reclaim passes, longer than one.
DEADLINE_MS = 500
#: How many times the hook kills the first worker.
CRASHES = 3

HOOK_MODULE = """\
import os

def check(event):
    if event.payload.get("die") and os.environ.get("HOOKBUS_TEST_DIE_HERE"):
        os._exit(1)
    return {"context": ["ran"]}
"""


def write_killing_hook(root: Path) -> Path:
    folder = root / "hooks" / "killer"
    folder.mkdir(parents=True)
    (folder / "killer.py").write_text(HOOK_MODULE)
    (folder / "HOOK.toml").write_text(
        'name = "killer"\nevents = ["PreToolUse"]\n[action.python]\n'
        'entrypoint = "killer:check"\ntimeout_secs = 0.4\n'
    )
    return folder.parent


def ask(bus: HookBus, **payload: object) -> tuple[Decision, float]:
    started = time.monotonic()
    event = Event(kind="PreToolUse", payload={"tool_name": "Bash", **payload})
    decision = bus.request(event, deadline_ms=DEADLINE_MS)
    return decision, time.monotonic() - started


@pytest.mark.timing  # half-second deadlines across a process crash: no other load may run
def test_requests_held_by_a_worker_a_hook_killed_are_answered_by_the_survivors_hooks(
    tmp_path: Path, real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    hooks = write_killing_hook(tmp_path)
    dies = {"HOOKBUS_TEST_DIE_HERE": "1"}
    with (
        chain_worker_cli(
            real_redis_url, namespace, tmp_path, name="a", env=dies, hooks_dir=hooks
        ) as (a_log, _),
        chain_worker_cli(real_redis_url, namespace, tmp_path, name="b", hooks_dir=hooks),
    ):
        bus = HookBus.from_url(real_redis_url, namespace)
        try:
            fatal: list[tuple[Decision, float]] = []
            end = time.monotonic() + 60
            while a_log.read_text().count("died: exit code 1") < CRASHES:
                assert time.monotonic() < end, "the hook never reached the first worker"
                fatal.append(ask(bus, die=True))
            time.sleep(0.2)
            ordinary = []
            for _ in range(20):
                ordinary.append(ask(bus))
                time.sleep(0.15)
        finally:
            bus.close()
    crashed = a_log.read_text().count("died: exit code 1")
    assert crashed >= CRASHES
    late = [
        (round(took, 3), d.reason) for d, took in fatal + ordinary if d.degraded or not d.context
    ]
    assert not late, f"{len(late)} of {len(fatal) + len(ordinary)} answered degraded: {late[:5]}"
    assert all(d.context == ["ran"] for d, _ in fatal + ordinary)
