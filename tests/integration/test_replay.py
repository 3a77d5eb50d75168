"""`hookbus replay`: recorded decisions re-run against a candidate folder, on a real fleet.

A chain worker serves folder A (a guard that denies ``rm -rf``); requests go through it and
land in the decision log. Replaying against folder B (the same guard plus one that denies
reading ``.env`` files) must report exactly the requests B flips, and nothing else.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from hookbus import HookBus
from hookbus.bus.keys import Keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event
from hookbus.workers.fleet.heartbeat import list_workers
from hookbus.workers.replay import parse_time_ms
from tests.blocking_helpers import wait_for
from tests.replay_helpers import ENV_GUARD, RM_GUARD, hooks_folder, run_replay

pytestmark = pytest.mark.integration


@pytest.fixture
def fleet_env(real_redis_url: str, namespace: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env.update(HOOKBUS_REDIS_URL=real_redis_url, HOOKBUS_NAMESPACE=namespace)
    return env


@pytest.fixture
def recorded(
    fleet_env: dict[str, str], real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> Iterator[dict[str, str]]:
    """Serve folder A, send four requests through it; yield their request ids by command."""
    folder_a = hooks_folder(tmp_path / "a", **{"no-rm-rf": RM_GUARD})
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hookbus",
            "worker",
            "--role",
            "chain",
            "--hooks-dir",
            str(folder_a),
        ],
        env=fleet_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    keys = Keys.for_namespace(namespace)
    ids: dict[str, str] = {}
    try:
        wait_for(
            lambda: [w for w in list_workers(real_redis, keys) if w.pid == worker.pid],
            what="the chain worker's heartbeat",
        )
        bus = HookBus(Settings(redis_url=fleet_env["HOOKBUS_REDIS_URL"], namespace=namespace))
        for command in ("rm -rf /", "ls -la", "cat .env", "cat README.md"):
            event = Event(
                kind="PreToolUse",
                session_id="s",
                payload={"tool_name": "Bash", "tool_input": {"command": command}},
            )
            decision = bus.request(event, deadline_ms=5000)
            assert not decision.degraded, decision
            assert decision.request_id
            ids[command] = decision.request_id
        bus.close()
    finally:
        worker.terminate()
        worker.wait(timeout=20)
    yield ids


def test_replay_reports_exactly_the_requests_the_candidate_flips(
    recorded: dict[str, str], fleet_env: dict[str, str], tmp_path: Path
) -> None:
    folder_b = hooks_folder(tmp_path / "b", **{"no-rm-rf": RM_GUARD, "no-dotenv": ENV_GUARD})

    done = run_replay(fleet_env, "--since", "10m", "--hooks-dir", str(folder_b), "--json")

    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["replayed"] == 4
    assert report["missing"] == 0
    (change,) = report["changed"]
    assert change["request_id"] == recorded["cat .env"]
    assert (change["kind"], change["before"], change["after"]) == ("PreToolUse", "allow", "deny")
    assert change["hook"] == "no-dotenv"
    assert change["reason"] == "secrets stay unread"


def test_replay_against_the_same_folder_changes_nothing(
    recorded: dict[str, str], fleet_env: dict[str, str], tmp_path: Path
) -> None:
    same = hooks_folder(tmp_path / "same", **{"no-rm-rf": RM_GUARD})

    report = json.loads(
        run_replay(fleet_env, "--since", "10m", "--hooks-dir", str(same), "--json").stdout
    )

    assert (report["replayed"], report["changed"]) == (4, [])


def test_requests_trimmed_from_the_stream_are_counted_missing_not_guessed(
    recorded: dict[str, str],
    fleet_env: dict[str, str],
    real_redis: redis.Redis,
    namespace: str,
    tmp_path: Path,
) -> None:
    real_redis.xtrim(Keys.for_namespace(namespace).requests, maxlen=0)
    empty = hooks_folder(tmp_path / "empty", **{"no-dotenv": ENV_GUARD})

    report = json.loads(
        run_replay(fleet_env, "--since", "10m", "--hooks-dir", str(empty), "--json").stdout
    )

    assert (report["replayed"], report["missing"], report["changed"]) == (0, 4, [])


def test_a_window_before_the_traffic_replays_nothing(
    recorded: dict[str, str], fleet_env: dict[str, str], tmp_path: Path
) -> None:
    folder_b = hooks_folder(tmp_path / "b", **{"no-dotenv": ENV_GUARD})

    done = run_replay(
        fleet_env, "--since", "3h", "--until", "2h", "--hooks-dir", str(folder_b), "--json"
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["replayed"] == 0


def test_a_candidate_folder_that_does_not_load_is_refused_with_the_reason(
    fleet_env: dict[str, str], tmp_path: Path
) -> None:
    broken = hooks_folder(tmp_path / "broken", guard=('name = "g"\nevents = ["NoSuchKind"]\n', ""))

    done = run_replay(fleet_env, "--since", "1h", "--hooks-dir", str(broken))

    assert done.returncode != 0
    assert "does not load" in done.stderr


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("15m", 1_000_000 - 900_000),
        ("2h", 1_000_000 - 7_200_000),
        ("1700000000000", 1_700_000_000_000),
        ("2026-11-24T10:00:00+00:00", 1_795_514_400_000),
    ],
)
def test_times_are_read_as_durations_ago_iso_times_or_milliseconds(
    text: str, expected: int
) -> None:
    assert parse_time_ms(text, now_ms=1_000_000) == expected
