"""The per-event hook judges worker liveness on Redis's clock, not the host's.

A laptop whose clock runs two minutes fast (or slow) must still reach a live fleet: run
under ``faketime``, ``hookbus claude-code hook`` gets the chain worker's own answer, never
"no chain worker alive".
"""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from tests.lean_helpers import chain_worker, faketime_binary, pre_tool_use, private_env, run_hook


@pytest.mark.parametrize("offset", ["+120s", "-120s"])
def test_the_hook_reaches_a_live_fleet_with_the_host_clock_off_by_two_minutes(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, tmp_path: Path, offset: str
) -> None:
    faketime = faketime_binary()
    env = private_env(tmp_path, HOOKBUS_REDIS_URL=real_redis_url, HOOKBUS_NAMESPACE=namespace)
    with chain_worker(real_redis_url, namespace, real_redis):
        code, out, err = run_hook(
            pre_tool_use("echo HOOKBUS_DENY"), env, prefix=(faketime, "-f", offset)
        )
    assert code == 0, err
    assert out == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "denied by the fleet: PreToolUse",
        }
    }, err
