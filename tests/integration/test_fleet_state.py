"""Fleet-wide state on real parts: limits, locks and escalation held by the whole fleet
(several chain workers, RQ workers for the release events), and notices delivered once per
session through ``hookbus claude-code hook``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from hookbus import HookBus
from hookbus.bus import keys
from hookbus.bus.wire import Event
from hookbus.state.admin import send_notice, show_state
from hookbus.state.store import lock_id
from tests.cluster_fixture import LocalCluster, local_cluster
from tests.state_helpers import fleet, fleet_env, request_all, tool_call, write_hook

LIMIT = """
events = ["PreToolUse"]
on_error = "deny"
[limit]
key = "{tool}"
max = 20
per = "1h"
"""

LOCK = """
events = ["PreToolUse"]
on_error = "deny"
[match]
tools = ["Bash"]
[lock]
key = "deploy:{payload.tool_input.environment}"
ttl = "{ttl}"
release_on = ["PostToolUse", "SessionEnd"]
"""


def _outcomes(decisions: list[object]) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in decisions:
        key = f"{d.outcome}{' (degraded)' if d.degraded else ''}"  # type: ignore[attr-defined]
        out[key] = out.get(key, 0) + 1
    return out


def test_two_hundred_requests_from_fifty_sessions_over_two_workers_let_exactly_twenty_through(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    write_hook(tmp_path, "bash-budget", LIMIT)
    with fleet(real_redis_url, namespace, tmp_path) as workers:
        workers.start("chain", "--concurrency", "4")
        workers.start("chain", "--concurrency", "4")
        workers.wait_chain_workers(2)
        events = [tool_call(f"s{i % 50}", agent=f"a{i % 7}") for i in range(200)]
        decisions = request_all(real_redis_url, namespace, events, deadline_ms=10_000)
    assert _outcomes(decisions) == {"allow": 20, "deny": 180}
    refused = next(d for d in decisions if d.outcome == "deny")
    assert "limit 'Bash' reached: 20 of 20 per 1h" in (refused.reason or "")


def test_fifty_sessions_racing_for_a_lock_get_one_grant_then_one_more_after_the_release_event(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    write_hook(tmp_path, "deploy-lock", LOCK.replace("{ttl}", "15m"))
    with fleet(real_redis_url, namespace, tmp_path) as workers:
        workers.start("chain", "--concurrency", "4")
        workers.start("chain", "--concurrency", "4")
        workers.start("fanout")
        workers.start("rq")
        workers.wait_chain_workers(2)
        sessions = [f"s{i}" for i in range(50)]
        first = request_all(
            real_redis_url,
            namespace,
            [tool_call(s, environment="production") for s in sessions],
            deadline_ms=10_000,
        )
        assert _outcomes(first) == {"allow": 1, "deny": 49}
        holder = sessions[[d.outcome for d in first].index("allow")]
        refused = next(d for d in first if d.outcome == "deny")
        assert "held by agent 'agent-1' since" in (refused.reason or "")
        assert holder not in (refused.reason or "")  # no session id another agent could reuse
        # the holder's tool finished: its PostToolUse (published, run by an RQ worker) frees it
        with HookBus.from_url(real_redis_url, namespace=namespace) as bus:
            bus.publish(
                Event(
                    kind="PostToolUse",
                    session_id=holder,
                    agent_id="agent-1",
                    payload={"tool_name": "Bash", "tool_input": {"environment": "production"}},
                )
            )
        settings = workers.settings()
        end = time.monotonic() + 20
        while show_state(settings, lock_id("deploy:production")) is not None:
            assert time.monotonic() < end, "the holder's PostToolUse did not release the lock"
            time.sleep(0.05)
        others = [s for s in sessions if s != holder]
        second = request_all(
            real_redis_url,
            namespace,
            [tool_call(s, environment="production") for s in others],
            deadline_ms=10_000,
        )
        assert _outcomes(second) == {"allow": 1, "deny": 48}


def test_a_lock_whose_hook_also_runs_an_action_is_released_by_the_holders_post_tool_use(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    text = LOCK.replace("{ttl}", "15m").replace(
        'events = ["PreToolUse"]', 'events = ["PreToolUse", "PostToolUse"]'
    )
    folder = write_hook(
        tmp_path, "deploy-lock", f'{text}\n[action.python]\nentrypoint = "note:record"\n'
    )
    (folder / "note.py").write_text("def record(event):\n    return None\n")
    with fleet(real_redis_url, namespace, tmp_path) as workers:
        workers.start("chain", "--concurrency", "4")
        workers.start("fanout")
        workers.start("rq")
        workers.wait_chain_workers(1)
        sessions = [f"s{i}" for i in range(5)]
        first = request_all(
            real_redis_url,
            namespace,
            [tool_call(s, environment="production") for s in sessions],
            deadline_ms=10_000,
        )
        assert _outcomes(first) == {"allow": 1, "deny": 4}
        holder = sessions[[d.outcome for d in first].index("allow")]
        with HookBus.from_url(real_redis_url, namespace=namespace) as bus:
            bus.publish(
                Event(
                    kind="PostToolUse",
                    session_id=holder,
                    agent_id="agent-1",
                    payload={"tool_name": "Bash", "tool_input": {"environment": "production"}},
                )
            )
        settings = workers.settings()
        end = time.monotonic() + 20
        while show_state(settings, lock_id("deploy:production")) is not None:
            assert time.monotonic() < end, "the holder's PostToolUse did not release the lock"
            time.sleep(0.05)
        others = [s for s in sessions if s != holder]
        second = request_all(
            real_redis_url,
            namespace,
            [tool_call(s, environment="production") for s in others],
            deadline_ms=10_000,
        )
        assert _outcomes(second) == {"allow": 1, "deny": 3}


def test_a_holder_that_dies_is_released_by_the_ttl_and_state_survives_a_worker_restart(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    write_hook(tmp_path, "deploy-lock", LOCK.replace("{ttl}", "20s"))
    with fleet(real_redis_url, namespace, tmp_path) as workers:
        chain = workers.start("chain")
        workers.wait_chain_workers(1)
        with HookBus.from_url(real_redis_url, namespace=namespace) as bus:
            assert (
                bus.request(tool_call("dies", environment="prod"), deadline_ms=5_000).outcome
                == "allow"
            )
            # the worker is killed and replaced: the lock lives in Redis, not in a worker
            os.kill(chain.pid, signal.SIGKILL)
            chain.wait(10)
            workers.start("chain")
            workers.wait_chain_workers(1)
            # the killed worker's heartbeat still counts a few seconds: on a busy host the
            # new one may start after the first deadline, which a failure policy answers
            end = time.monotonic() + 60
            held = bus.request(tool_call("next", environment="prod"), deadline_ms=5_000)
            while held.degraded and time.monotonic() < end:
                held = bus.request(tool_call("next", environment="prod"), deadline_ms=5_000)
            assert held.outcome == "deny" and "agent 'agent-1'" in (held.reason or "")
            # the agent holding it never comes back: the TTL frees the lock
            entry = show_state(workers.settings(), lock_id("deploy:prod"))
            assert entry is not None and 0 < entry.ttl_ms <= 20_000
            time.sleep(entry.ttl_ms / 1000 + 0.2)
            assert (
                bus.request(tool_call("next", environment="prod"), deadline_ms=5_000).outcome
                == "allow"
            )


def test_escalation_halts_a_session_on_its_fifth_deny(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    write_hook(
        tmp_path,
        "no-rm",
        'events = ["PreToolUse"]\n[match.tool_input]\ncommand = "rm*"\n'
        '[limit]\nkey = "{session}"\nmax = 1\nper = "1h"\n',
    )
    write_hook(
        tmp_path,
        "five-strikes",
        'events = ["PreToolUse"]\n[escalate]\nafter = 5\n'
        'within = "10m"\nof = "deny"\nper = "session"\nthen = "halt"\n',
    )
    with fleet(real_redis_url, namespace, tmp_path) as workers:
        workers.start("chain")
        workers.start("chain")
        workers.wait_chain_workers(2)
        with HookBus.from_url(real_redis_url, namespace=namespace) as bus:
            outcomes = [
                bus.request(tool_call("bad", command="rm -rf x"), deadline_ms=5_000).outcome
                for _ in range(6)
            ]
            calm = bus.request(tool_call("calm", command="rm x"), deadline_ms=5_000).outcome
    assert outcomes == ["allow", "deny", "deny", "deny", "deny", "halt"]
    assert calm == "allow"


def test_an_operator_resets_a_stuck_lock_and_the_history_records_it(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    write_hook(tmp_path, "deploy-lock", LOCK.replace("{ttl}", "1h"))
    with fleet(real_redis_url, namespace, tmp_path) as workers:
        workers.start("chain")
        workers.wait_chain_workers(1)
        with HookBus.from_url(real_redis_url, namespace=namespace) as bus:
            bus.request(tool_call("stuck", environment="prod"), deadline_ms=5_000)
        env = fleet_env(real_redis_url, namespace)
        listed = subprocess.run(
            [sys.executable, "-m", "hookbus", "state", "list", "--json"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        assert [e["id"] for e in json.loads(listed.stdout)] == ["lock:deploy:prod"]
        subprocess.run(
            [sys.executable, "-m", "hookbus", "state", "reset", "lock:deploy:prod"],
            env=env,
            check=True,
            capture_output=True,
        )
        again = subprocess.run(
            [sys.executable, "-m", "hookbus", "state", "reset", "lock:deploy:prod"],
            env=env,
            capture_output=True,
            text=True,
        )
        assert again.returncode == 1 and "no fleet state" in again.stderr
        history = subprocess.run(
            [sys.executable, "-m", "hookbus", "hooks", "history", "--json"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        assert "state-reset" in history.stdout and "lock:deploy:prod" in history.stdout


# --- notices -------------------------------------------------------------------------------

FIXTURE = json.loads(
    (
        Path(__file__).resolve().parents[1] / "fixtures" / "claude_code" / "UserPromptSubmit.json"
    ).read_text()
)


def _claude_code(
    env: dict[str, str], kind: str, session: str, **fields: object
) -> dict[str, object]:
    body = {**FIXTURE, "hook_event_name": kind, "session_id": session, **fields}
    done = subprocess.run(
        [sys.executable, "-m", "hookbus", "claude-code", "hook"],
        input=json.dumps(body),
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode in (0, 2), done.stderr
    return json.loads(done.stdout) if done.stdout.strip() else {}


def test_a_notice_reaches_each_matching_session_once_and_never_another(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    with fleet(real_redis_url, namespace, tmp_path) as workers:
        workers.start("chain")
        workers.wait_chain_workers(1)
        settings = workers.settings()
        notice = send_notice(
            settings,
            "main is frozen until 18:00",
            severity="warning",
            ttl_ms=600_000,
            agent="team-a-*",
        )
        time.sleep(1.2)  # a worker reloads the notices at most once a second
        got: dict[str, list[str]] = {}
        for round_ in range(2):
            for session, agent in (
                ("s1", "team-a-1"),
                ("s2", "team-a-2"),
                ("s3", "team-a-3"),
                ("s4", "team-b-1"),
            ):
                env = fleet_env(real_redis_url, namespace, HOOKBUS_AGENT_ID=agent)
                out = _claude_code(env, "UserPromptSubmit", session, prompt=f"round {round_}")
                context = (out.get("hookSpecificOutput") or {}).get("additionalContext")  # type: ignore[union-attr]
                if context:
                    got.setdefault(session, []).append(str(context))
    assert sorted(got) == ["s1", "s2", "s3"]
    assert all(len(v) == 1 and "main is frozen until 18:00" in v[0] for v in got.values())
    assert notice.id


def test_a_blocking_critical_notice_refuses_the_next_tool_call_of_each_matching_session(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    with fleet(real_redis_url, namespace, tmp_path) as workers:
        workers.start("chain")
        workers.wait_chain_workers(1)
        env = fleet_env(real_redis_url, namespace)
        sent = subprocess.run(
            [
                sys.executable,
                "-m",
                "hookbus",
                "notify",
                "production is on fire: stop",
                "--severity",
                "critical",
                "--blocking",
                "--ttl",
                "10m",
                "--agent",
                "agent-1",
                "--session",
                "s1",
                "--json",
            ],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        notice_id = json.loads(sent.stdout)["id"]
        time.sleep(1.2)
        with HookBus.from_url(real_redis_url, namespace=namespace) as bus:
            refused = bus.request(tool_call("s1"), deadline_ms=5_000)
            other = bus.request(tool_call("s2"), deadline_ms=5_000)
            assert refused.outcome == "deny" and "production is on fire" in (refused.reason or "")
            assert other.outcome == "allow"
            subprocess.run(
                [sys.executable, "-m", "hookbus", "notices", "retract", notice_id],
                env=env,
                check=True,
                capture_output=True,
            )
            time.sleep(1.2)
            assert bus.request(tool_call("s1"), deadline_ms=5_000).outcome == "allow"


# --- the 3-master cluster -------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with local_cluster(3) as started:
        yield started


def test_the_limit_and_the_lock_hold_on_a_three_master_cluster(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    namespace = f"c{uuid.uuid4().hex[:8]}"
    write_hook(tmp_path / "limit", "bash-budget", LIMIT)
    write_hook(tmp_path / "lock", "deploy-lock", LOCK.replace("{ttl}", "15m"))
    try:
        for folder, events, expected in (
            (
                tmp_path / "limit",
                [tool_call(f"s{i % 50}") for i in range(200)],
                {"allow": 20, "deny": 180},
            ),
            (
                tmp_path / "lock",
                [tool_call(f"s{i}", environment="prod") for i in range(50)],
                {"allow": 1, "deny": 49},
            ),
        ):
            with fleet(cluster.url, namespace, folder, HOOKBUS_PARTITIONS="3") as workers:
                workers.start("chain", "--concurrency", "4")
                workers.start("chain", "--concurrency", "4")
                workers.wait_chain_workers(2)
                decisions = request_all(cluster.url, namespace, events, deadline_ms=10_000)
                assert _outcomes(decisions) == expected
    finally:
        for node in cluster.node_clients():
            for pattern in (
                keys.namespace_pattern(namespace),
                keys.state_pattern(namespace),
                keys.partitions_pattern(namespace),
            ):
                for key in node.scan_iter(match=pattern, count=1000):
                    node.delete(key)  # one key per call: a cluster node refuses cross-slot DELs
