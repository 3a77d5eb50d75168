"""What a producer's Redis credential (the shipped ``hookbus-producer`` user) can do to a live
fleet on a real ``redis-server`` with the shipped ACL: each attack is refused, or the fleet
finds the damage, says so in ``hookbus status`` and recovers it, and another agent's request
right after is answered by the hooks, not by a policy."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import redis

from hookbus import HookBus
from hookbus.authoring import release
from hookbus.bus.keys import Keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Decision, Event
from hookbus.workers.fleet.heartbeat import list_workers
from hookbus.workers.fleet.status import GROUP_GRACE_MS
from tests.acl_helpers import NS, ROOT, AclServer, acl_redis
from tests.reload_helpers import write_shell_hook

KEYS = Keys.for_namespace(NS)
MAX_ID = "18446744073709551615-18446744073709551615"
GUARD = 'if grep -q SECRET; then echo "a secret in the prompt" >&2; exit 2; fi\nexit 0'


@dataclass
class Fleet:
    server: AclServer
    chain: subprocess.Popen[bytes]
    fanout: subprocess.Popen[bytes]


@pytest.fixture(scope="module")
def fleet_parts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """A server with the shipped ACL, a bundle whose PromptSubmit guard denies prompts with
    SECRET in them, a chain worker and a fan-out dispatcher logged in as the worker user."""
    work = tmp_path_factory.mktemp("fleet")
    with acl_redis(work) as server:
        hooks = work / "hooks"
        folder = write_shell_hook(hooks, "prompt-guard", GUARD, events=("PromptSubmit",))
        manifest = folder / "HOOK.toml"
        manifest.write_text('on_error = "deny"\n' + manifest.read_text())
        operator = server.client("hookbus-operator")
        pushed = release.release_folder(operator, Settings(namespace=NS), hooks, signing_key=None)
        env = dict(os.environ, HOOKBUS_REDIS_URL=server.url("hookbus-worker"))
        env.update(HOOKBUS_NAMESPACE=NS, PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(work / "c"))
        env.pop("HOOKBUS_VERIFY_KEY_FILE", None)
        procs = []
        for role in ("chain", "fanout"):
            with (work / f"{role}.log").open("wb") as log_out:
                procs.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "hookbus", "worker", "--role", role],
                        env=env,
                        cwd=work,
                        stdin=subprocess.DEVNULL,
                        stdout=log_out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,  # SIGSTOP reaches a supervised worker's child
                    )
                )
        try:
            deadline = time.monotonic() + 30
            while len([w for w in list_workers(operator, KEYS) if w.version == pushed.version]) < 2:
                for proc in procs:
                    assert proc.poll() is None, (work / "chain.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "the workers never ran the pushed bundle"
                time.sleep(0.1)
            yield Fleet(server, procs[0], procs[1])
        finally:
            for proc in procs:
                os.killpg(proc.pid, signal.SIGCONT)
                proc.terminate()
            for proc in procs:
                proc.wait(15)
            operator.close()


@pytest.fixture
def fleet(fleet_parts: Fleet) -> AclServer:
    return fleet_parts.server


def another_agent(server: AclServer, prompt: str, *, deadline_ms: int = 3_000) -> Decision:
    settings = Settings(redis_url=server.url("hookbus-producer"), namespace=NS)
    with HookBus(settings) as bus:
        return bus.request(
            Event(kind="PromptSubmit", agent_id="bob", payload={"prompt": prompt}),
            deadline_ms=deadline_ms,
        )


def status_json(server: AclServer) -> tuple[int, dict[str, object]]:
    env = dict(os.environ, HOOKBUS_REDIS_URL=server.url("hookbus-operator"), HOOKBUS_NAMESPACE=NS)
    done = subprocess.run(
        [sys.executable, "-m", "hookbus", "--json", "status"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.returncode, json.loads(done.stdout)


def test_the_fleet_answers_by_its_hooks_before_any_attack(fleet: AclServer) -> None:
    decision = another_agent(fleet, "my SECRET is hunter2")
    assert (decision.outcome, decision.degraded) == ("deny", False), decision.reason
    assert another_agent(fleet, "hello").outcome == "allow"


def test_an_exhausted_request_stream_is_recovered_and_the_next_request_runs_the_guard(
    fleet: AclServer,
) -> None:
    with fleet.client("hookbus-producer") as attacker:
        attacker.execute_command("XADD", KEYS.requests, MAX_ID, "e", "x")
        with pytest.raises(redis.exceptions.ResponseError, match="exhausted"):
            attacker.execute_command("XADD", KEYS.requests, "*", "e", "x")
    decision = another_agent(fleet, "my SECRET is hunter2")
    assert (decision.outcome, decision.degraded) == ("deny", False), decision.reason
    assert "secret in the prompt" in str(decision.reason)
    with fleet.client("hookbus-operator") as operator:
        last = operator.xinfo_stream(KEYS.requests)["last-generated-id"]
        assert not last.startswith(b"18446744073709551615")
        assert [g["name"] for g in operator.xinfo_groups(KEYS.requests)] == [b"chain"]


def test_a_request_stream_pushed_into_the_future_is_recovered(fleet: AclServer) -> None:
    with fleet.client("hookbus-producer") as attacker:
        future_ms = int(time.time() * 1000) + 86_400_000
        attacker.execute_command("XADD", KEYS.requests, f"{future_ms}-0", "e", "x")
    deadline = time.monotonic() + 5
    with fleet.client("hookbus-operator") as operator:
        while True:
            last = operator.xinfo_stream(KEYS.requests)["last-generated-id"]
            if int(last.split(b"-")[0]) < future_ms:
                break
            assert time.monotonic() < deadline, "the stream was not recovered"
            time.sleep(0.05)
    decision = another_agent(fleet, "my SECRET is hunter2")
    assert (decision.outcome, decision.degraded) == ("deny", False), decision.reason


def test_an_exhausted_event_stream_is_recovered_with_its_undelivered_events(
    fleet: AclServer,
) -> None:
    with fleet.client("hookbus-producer") as attacker:
        attacker.execute_command("XADD", KEYS.events, MAX_ID, "e", "x")
    settings = Settings(redis_url=fleet.url("hookbus-producer"), namespace=NS)
    deadline = time.monotonic() + 5
    with HookBus(settings) as bus:
        while True:
            try:
                bus.publish(Event(kind="PostToolUse", payload={"tool_name": "Bash"}))
                break
            except Exception:
                assert time.monotonic() < deadline, "publishing never worked again"
                time.sleep(0.05)
    with fleet.client("hookbus-operator") as operator:
        assert [g["name"] for g in operator.xinfo_groups(KEYS.events)] == [b"fanout"]


def _wait_status_clear(server: AclServer) -> dict[str, object]:
    """Status clean, and every worker up for longer than the grace in which a missing
    group is no problem yet (a worker makes its group as it starts): the module's fleet may
    have just started when the first test runs."""
    deadline = time.monotonic() + 10 + GROUP_GRACE_MS / 1000
    while True:
        code, data = status_json(server)
        workers = data["workers"]
        assert isinstance(workers, list)
        settled = all(w["uptime_ms"] >= GROUP_GRACE_MS for w in workers)
        if code == 0 and not data["stream_problems"] and settled:
            return data
        assert time.monotonic() < deadline, (data["stream_problems"], workers)
        time.sleep(0.2)


@pytest.mark.parametrize(
    ("attack", "problem"),
    [
        (("XADD", KEYS.requests, MAX_ID, "e", "x"), "exhausted"),
        (("XADD", KEYS.requests, f"{2**62}-0", "e", "x"), "ahead"),
        (("DEL", KEYS.requests), "no_group"),
    ],
)
def test_a_poisoned_or_deleted_stream_is_reported_by_status_until_the_fleet_recovers_it(
    fleet_parts: Fleet, attack: tuple[str, ...], problem: str
) -> None:
    server = fleet_parts.server
    _wait_status_clear(server)
    os.killpg(fleet_parts.chain.pid, signal.SIGSTOP)  # no warden: the damage stays
    try:
        with server.client("hookbus-operator") as operator:
            operator.execute_command(*attack)
        code, data = status_json(server)
        assert code == 1
        problems = data["stream_problems"]
        assert isinstance(problems, list)
        assert [(p["key"], p["problem"]) for p in problems] == [(KEYS.requests, problem)]
    finally:
        os.killpg(fleet_parts.chain.pid, signal.SIGCONT)
    _wait_status_clear(server)
    decision = another_agent(server, "my SECRET is hunter2")
    assert (decision.outcome, decision.degraded) == ("deny", False), decision.reason


def test_the_producer_user_cannot_run_a_script_or_delete_expire_or_trim_a_stream(
    fleet: AclServer,
) -> None:
    with fleet.client("hookbus-producer") as attacker:
        for command in (
            ("EVAL", "local t = redis.call('TIME') while true do end", "0"),
            ("PEXPIRE", KEYS.requests, "1"),
            ("DEL", KEYS.events),
            ("XTRIM", KEYS.events, "MAXLEN", "0"),
            ("XGROUP", "DESTROY", KEYS.requests, "chain"),
        ):
            with pytest.raises(redis.exceptions.NoPermissionError):
                attacker.execute_command(*command)
    decision = another_agent(fleet, "my SECRET is hunter2")
    assert (decision.outcome, decision.degraded) == ("deny", False), decision.reason
