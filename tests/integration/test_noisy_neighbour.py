"""One agent's slow hook cannot take another agent's guarded calls down with it: while 40
of one agent's requests each hold a hook for 3 s on a real chain worker, another agent's
10 guarded calls at the default 250 ms deadline are all answered by the hooks, in
milliseconds. The slow chain no longer holds the read loop (the watchdog reads beside it)
and one agent holds at most half the spill threads."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import redis

from hookbus import HookBus
from hookbus.bus.wire import Decision, Event
from tests.wiped_helpers import chain_worker_cli

#: The noisy agent's own slow hook: it runs on that agent's events only.
SLOW_HOOK = """\
import time

def check(event):
    time.sleep(3)
    return None
"""


@pytest.mark.timing  # 250 ms deadlines beside 3 s hooks: no other load may run
def test_another_agents_guarded_calls_keep_their_latency_beside_a_slow_agent(
    tmp_path: Path, real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    hooks = tmp_path / "hooks"
    (hooks / "slow").mkdir(parents=True)
    (hooks / "slow" / "slow.py").write_text(SLOW_HOOK)
    (hooks / "slow" / "HOOK.toml").write_text(
        'name = "slow"\nevents = ["PreToolUse"]\n[match]\nagents = ["noisy"]\n'
        '[action.python]\nentrypoint = "slow:check"\ntimeout_secs = 5\n'
    )
    quiet: list[tuple[Decision, float]] = []
    with chain_worker_cli(real_redis_url, namespace, tmp_path, hooks_dir=hooks):

        def noisy(n: int) -> None:
            bus = HookBus.from_url(real_redis_url, namespace)
            try:
                payload = {"tool_name": "Bash", "tool_input": {"command": f"make {n}"}}
                event = Event(kind="PreToolUse", payload=payload, agent_id="noisy")
                bus.request(event, deadline_ms=6000)  # its calls may wait for its hook
            finally:
                bus.close()

        threads = [threading.Thread(target=noisy, args=(n,), daemon=True) for n in range(40)]
        for thread in threads:
            thread.start()
        time.sleep(0.5)  # the slow hook holds its requests now
        bus = HookBus.from_url(real_redis_url, namespace)
        try:
            for _ in range(10):
                started = time.monotonic()
                event = Event(kind="PreToolUse", payload={"tool_name": "Bash"}, agent_id="quiet")
                decision = bus.request(event, deadline_ms=250)
                quiet.append((decision, time.monotonic() - started))
        finally:
            bus.close()
        for thread in threads:
            thread.join(15)
    assert [(d.outcome, d.degraded) for d, _ in quiet] == [("allow", False)] * 10, quiet
    assert max(took for _, took in quiet) < 0.25
