"""Shadow hooks on a real fleet: a chain worker serves an enforcing guard and a shadow guard;
the answers are the enforcing guard's alone, and what the shadow guard would have decided
reaches the producer, the decision log and ``hookbus tail --decisions``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from hookbus import HookBus
from hookbus.bus import decision_batch
from hookbus.bus.keys import Keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Decision, Event, decode
from hookbus.workers.fleet.heartbeat import list_workers
from tests.blocking_helpers import wait_for

pytestmark = pytest.mark.integration

RM_GUARD = (
    'name = "no-rm-rf"\nevents = ["PreToolUse"]\npriority = 10\n'
    '[action.shell]\ncommand = "sh guard.sh"\ntimeout_secs = 5\n',
    "if grep -q 'rm -rf'; then echo 'no recursive deletes' >&2; exit 2; fi\n",
)
# the guard on trial: would deny reading .env files; shadow, so it decides nothing
ENV_TRIAL = (
    'name = "no-dotenv"\nevents = ["PreToolUse"]\nmode = "shadow"\non_error = "deny"\n'
    '[action.shell]\ncommand = "sh guard.sh"\ntimeout_secs = 5\n',
    "e=$(cat)\ncase \"$e\" in\n  *.env*) echo 'secrets stay unread' >&2; exit 2;;\n"
    "  *crash*) exit 7;;\nesac\n",
)


def hooks_folder(root: Path, **hooks: tuple[str, str]) -> Path:
    for name, (manifest, script) in hooks.items():
        (root / name).mkdir(parents=True)
        (root / name / "HOOK.toml").write_text(manifest)
        (root / name / "guard.sh").write_text(script)
    return root


@pytest.fixture
def fleet(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> Iterator[tuple[HookBus, dict[str, str]]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env.update(
        HOOKBUS_REDIS_URL=real_redis_url,
        HOOKBUS_NAMESPACE=namespace,
        XDG_RUNTIME_DIR=str(tmp_path),
    )
    folder = hooks_folder(tmp_path / "hooks", **{"no-rm-rf": RM_GUARD, "no-dotenv": ENV_TRIAL})
    worker = subprocess.Popen(
        [sys.executable, "-m", "hookbus", "worker", "--role", "chain", "--hooks-dir", str(folder)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    keys = Keys.for_namespace(namespace)
    bus = HookBus(Settings(redis_url=real_redis_url, namespace=namespace))
    try:
        wait_for(
            lambda: [w for w in list_workers(real_redis, keys) if w.pid == worker.pid],
            what="the chain worker's heartbeat",
        )
        yield bus, env
    finally:
        bus.close()
        worker.terminate()
        worker.wait(timeout=20)


def ask(bus: HookBus, command: str) -> Decision:
    event = Event(
        kind="PreToolUse",
        session_id="s",
        payload={"tool_name": "Bash", "tool_input": {"command": command}},
    )
    return bus.request(event, deadline_ms=5000)


def shadow_of(decision: Decision) -> list[tuple[str, str, str | None]]:
    return [(run.hook, run.outcome, run.reason) for run in decision.shadow]


def test_the_shadow_guard_is_recorded_and_never_decides(
    fleet: tuple[HookBus, dict[str, str]], real_redis: redis.Redis, namespace: str
) -> None:
    bus, _env = fleet

    dotenv = ask(bus, "cat .env")
    rm = ask(bus, "rm -rf /")
    fine = ask(bus, "ls")
    crashed = ask(bus, "crash")

    assert dotenv.outcome == "allow" and not dotenv.degraded
    assert shadow_of(dotenv) == [("no-dotenv", "deny", "secrets stay unread")]
    assert rm.outcome == "deny" and rm.reason == "no recursive deletes"
    assert shadow_of(rm) == [("no-dotenv", "continue", None)]
    assert fine.outcome == "allow" and shadow_of(fine) == [("no-dotenv", "continue", None)]
    # a shadow hook failing with on_error = deny is recorded; the answer stays allow
    assert crashed.outcome == "allow" and not crashed.degraded
    assert [(r.hook, r.outcome) for r in crashed.shadow] == [("no-dotenv", "error")]

    def in_log() -> dict[str | None, Decision]:
        records = decision_batch.logged(real_redis, Keys.for_namespace(namespace).decisions)
        found = [decode(fields[b"d"], Decision) for fields in records if b"d" in fields]
        return {decision.request_id: decision for decision in found}

    deadline = time.monotonic() + 5  # the worker logs in bulk, within about 0.1 s
    while dotenv.request_id not in (logged := in_log()) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert shadow_of(logged[dotenv.request_id]) == shadow_of(dotenv)
    assert logged[dotenv.request_id].outcome == "allow"


def test_tail_decisions_shows_what_the_shadow_hook_would_have_done(
    fleet: tuple[HookBus, dict[str, str]], tmp_path: Path
) -> None:
    bus, env = fleet
    ask(bus, "cat .env")
    hookbus = str(Path(sys.executable).with_name("hookbus"))

    def tail(*extra: str) -> str:
        done = subprocess.run(
            [hookbus, "tail", "--decisions", "--last", "1", "--count", "1", *extra],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    line = tail()
    assert " allow" in line and "[shadow no-dotenv: deny (secrets stay unread)]" in line
    data: dict[str, Any] = json.loads(tail("--json"))
    assert data["outcome"] == "allow"
    assert [(r["hook"], r["outcome"], r["reason"]) for r in data["shadow"]] == [
        ("no-dotenv", "deny", "secrets stay unread")
    ]
    assert data["shadow"][0]["duration_us"] > 0


def test_replay_reports_what_the_candidate_s_shadow_hooks_would_say(
    fleet: tuple[HookBus, dict[str, str]], tmp_path: Path
) -> None:
    bus, env = fleet
    for command in ("cat .env", "ls", "rm -rf /"):
        ask(bus, command)
    candidate = hooks_folder(
        tmp_path / "candidate", **{"no-rm-rf": RM_GUARD, "no-dotenv": ENV_TRIAL}
    )

    replay = [sys.executable, "-m", "hookbus", "replay", "--since", "10m"]
    done = subprocess.run(
        [*replay, "--hooks-dir", str(candidate), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["replayed"], report["changed"]) == (3, [])
    assert report["shadow"] == {"no-dotenv": {"deny": 1, "continue": 2}}
    text = subprocess.run(
        [*replay, "--hooks-dir", str(candidate)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert "shadow no-dotenv: continue 2, deny 1" in text
