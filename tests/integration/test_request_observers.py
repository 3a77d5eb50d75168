"""Every answered request reaches its observers, off the critical path, exactly once.

A fleet (chain worker, fan-out role, RQ worker) serves a guard (denies ``rm -rf``), an
observer (``blocking = false`` on PromptSubmit, SessionStart, Stop and PreToolUse) and a 2 s
observer on PromptSubmit. Requests come from ``hookbus claude-code hook``, ``hookbus
gemini-cli hook``, ``hookbus codex hook`` (a process per event, the captured fixtures) and
``HookBus.request``; on one stream, on 3 partitions, and on a 3-master Redis Cluster (the
SDK only: the lean hook speaks to a single server). Each request runs the observer exactly
once, the PreToolUse the guard denied included, and the observer sees the decision; the
slow observer adds nothing to a request's latency; the request shows in the event log.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

from hookbus import HookBus
from hookbus.bus.keys import Keys
from hookbus.bus.settings.loader import RQSettings, Settings
from hookbus.bus.wire import Decision, Event, decode
from tests.cluster_fixture import local_cluster, local_server, namespace_spread
from tests.fanout_helpers import processes, spawn_worker, wait_for
from tests.observer_helpers import decisions, seen, write_hooks

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
RM = {"command": "rm -rf /tmp/observed"}
LS = {"command": "ls"}

pytestmark = pytest.mark.slow


@dataclass
class Fleet:
    settings: Settings
    record: redis.Redis
    key: str
    single_server: bool


def _env(settings: Settings, record_url: str, key: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env.update(
        HOOKBUS_REDIS_URL=settings.redis_url,
        HOOKBUS_NAMESPACE=settings.namespace,
        HOOKBUS_PARTITIONS=str(settings.partitions),
        HOOKBUS_RQ__RESULT_TTL_S="60",
        OBSERVE_RECORD_URL=record_url,
        OBSERVE_RECORD_KEY=key,
        PYTHONPATH=str(ROOT),
    )
    if settings.rq.redis_url:
        env["HOOKBUS_RQ__REDIS_URL"] = settings.rq.redis_url
    return env


@contextlib.contextmanager
def _started(settings: Settings, record_url: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The fleet's three roles running on ``settings``; yields their environment."""
    key = f"observe-record:{settings.namespace}"
    env = _env(settings, record_url, key)
    hooks = write_hooks(tmp_path / "hooks")
    probe = redis.Redis.from_url(record_url)

    def roles() -> set[str]:
        with HookBus(settings) as bus:
            beats: Any = bus.client.hgetall(Keys.for_namespace(settings.namespace).workers)
        return {json.loads(v).get("role") for v in beats.values()}

    with processes() as procs:
        for role in ("chain", "fanout", "rq"):
            procs.append(spawn_worker(role, hooks, env))
        wait_for(lambda: roles() >= {"chain", "fanout"}, 60, "a chain worker and a fan-out role")
        try:
            yield env
        finally:
            probe.delete(key, f"{key}:decision", f"{key}:slow")
            probe.close()


@pytest.fixture(params=["one-stream", "three-partitions"])
def fleet(
    request: pytest.FixtureRequest,
    real_redis_url: str,
    real_redis: redis.Redis,
    namespace: str,
    tmp_path: Path,
) -> Iterator[Fleet]:
    partitions = 1 if request.param == "one-stream" else 3
    settings = Settings(redis_url=real_redis_url, namespace=namespace, partitions=partitions)
    with _started(settings, real_redis_url, tmp_path) as env:
        yield Fleet(settings, real_redis, env["OBSERVE_RECORD_KEY"], single_server=True)
    for p in range(1, partitions):
        keys = Keys.for_partition(namespace, p)
        real_redis.delete(keys.requests, keys.events, keys.decisions, keys.dead_letters)


@pytest.fixture
def cluster_fleet(tmp_path: Path) -> Iterator[Fleet]:
    with local_cluster(3) as cluster, local_server() as plain:
        settings = Settings(
            redis_url=cluster.url,
            namespace=namespace_spread(cluster.url, 3, prefix="obs"),
            partitions=3,
            rq=RQSettings(redis_url=plain.url),
        )
        record = plain.client()
        with _started(settings, plain.url, tmp_path) as env:
            yield Fleet(settings, record, env["OBSERVE_RECORD_KEY"], single_server=False)
        record.close()


def _fixture(folder: str, name: str, session: str, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / folder / f"{name}.json").read_text())
    data.update(changes, session_id=session)
    return data


def _hook(cli: str, data: dict[str, Any], env: dict[str, str]) -> tuple[Any, float]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "hookbus", cli, "hook", "--timeout", "10"],
        input=json.dumps(data).encode(),
        capture_output=True,
        env=env,
        timeout=30,
    )
    took = time.perf_counter() - started
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode()
    return (json.loads(out) if out.strip() else None), took


def _cli_requests(env: dict[str, str]) -> Counter[str]:
    """Each CLI's SessionStart, prompt, denied and allowed tool calls, and Stop; what the
    observer must see (``kind|harness`` -> count)."""
    sent: Counter[str] = Counter()
    plans = {
        "claude-code": (
            "claude_code",
            [
                ("SessionStart", {}),
                ("UserPromptSubmit", {}),
                ("PreToolUse", {"tool_input": RM}),
                ("PreToolUse", {"tool_input": LS}),
                ("Stop", {}),
            ],
        ),
        "gemini-cli": (
            "gemini_cli",
            [
                ("SessionStart", {}),
                ("BeforeAgent", {}),
                ("BeforeTool", {"tool_input": RM}),
                ("AfterAgent", {}),
            ],
        ),
        "codex": (
            "codex",
            [
                ("SessionStart", {}),
                ("UserPromptSubmit", {}),
                ("PreToolUse", {"tool_input": RM}),
                ("Stop", {}),
            ],
        ),
    }
    from hookbus.harnesses.adapters import adapter

    for cli, (folder, events) in plans.items():
        session = f"{cli}-{uuid.uuid4().hex[:8]}"
        for name, changes in events:
            out, took = _hook(cli, _fixture(folder, name, session, **changes), env)
            if changes.get("tool_input") == RM:
                assert "refused by the guard: rm -rf" in json.dumps(out)
            assert took < 1.5, f"{cli} {name} took {took:.2f} s"
            assert out is None or "systemMessage" not in out, out
            sent[f"{adapter(cli).route(name).kind}|{cli}"] += 1
    return sent


def _sdk_requests(settings: Settings) -> tuple[Counter[str], list[float]]:
    sent: Counter[str] = Counter()
    prompt_latencies: list[float] = []
    with HookBus(settings) as bus:
        for i in range(6):  # sessions over every partition
            session = f"sdk-{i}-{uuid.uuid4().hex[:6]}"
            for kind, payload in (
                ("SessionStart", {}),
                ("PromptSubmit", {"prompt": "hello"}),
                ("PreToolUse", {"tool_name": "Bash", "tool_input": RM}),
                ("Stop", {}),
            ):
                started = time.perf_counter()
                decision = bus.request(
                    Event(kind=kind, session_id=session, payload=payload), deadline_ms=3000
                )
                took = time.perf_counter() - started
                assert not decision.degraded, decision
                if kind == "PromptSubmit":
                    prompt_latencies.append(took)
                if kind == "PreToolUse":
                    assert decision.outcome == "deny"
                sent[f"{kind}|sdk"] += 1
    return sent, prompt_latencies


def _check_observed(fleet: Fleet, sent: Counter[str]) -> None:
    def observed() -> Counter[str]:
        return Counter(k.rsplit("|", 1)[0] for k in seen(fleet.record, fleet.key))

    wait_for(lambda: observed() == sent, 60, "every request observed", lambda: (observed(), sent))
    time.sleep(1.5)  # a second delivery would show by now
    runs = seen(fleet.record, fleet.key)
    assert set(runs.values()) == {1}, runs
    assert observed() == sent
    shown = decisions(fleet.record, fleet.key)
    denied = {k: d for k, d in shown.items() if d and d["outcome"] == "deny"}
    harnesses = {k.split("|")[1] for k in sent}
    assert {k.split("|")[1] for k in denied} == harnesses
    for key, decision in denied.items():
        assert key.startswith("PreToolUse|")
        assert decision["hook"] == "guard"
        assert decision["reason"] == "refused by the guard: rm -rf"
        assert decision["degraded"] is False
    for key, decision in shown.items():
        assert decision is not None and decision["request_id"], key
        if key not in denied:
            assert (decision["outcome"], decision["hook"]) == ("allow", None)


def _events_logged(settings: Settings) -> list[Event]:
    from hookbus.bus.connection import partition_client

    found = []
    for p in range(settings.partitions):
        client = partition_client(settings, p)
        for _, fields in client.xrange(Keys.for_partition(settings.namespace, p).events):
            found.append(decode(fields[b"e"], Event))  # type: ignore[index]
    return found


def test_every_request_reaches_its_observers_once_with_the_decision(fleet: Fleet) -> None:
    env = _env(fleet.settings, fleet.settings.redis_url, fleet.key)
    sent = _cli_requests(env)
    sdk, prompt_latencies = _sdk_requests(fleet.settings)
    sent += sdk
    _check_observed(fleet, sent)
    # the 2 s observer of PromptSubmit ran on every prompt, and no prompt waited for it
    wait_for(
        lambda: len(fleet.record.hgetall(f"{fleet.key}:slow")) == sent["PromptSubmit|sdk"] + 3,
        30,
        "the slow observer's runs",
    )
    assert max(prompt_latencies) < 0.5, prompt_latencies
    # tail and replays see the requests: each is in the event log with its decision
    logged = [e for e in _events_logged(fleet.settings) if "decision" in e.meta]
    assert len(logged) == sum(sent.values())
    assert all(e.reply_to is None and e.budget_ms is None for e in logged)


def test_on_a_cluster_every_request_reaches_its_observers_once(cluster_fleet: Fleet) -> None:
    sent, prompt_latencies = _sdk_requests(cluster_fleet.settings)
    _check_observed(cluster_fleet, sent)
    assert max(prompt_latencies) < 0.5, prompt_latencies


def test_a_decision_record_names_the_deciding_hook() -> None:
    from hookbus.bus.wire import HookRun
    from hookbus.workers.fanout.observer import decision_summary

    decision = Decision(
        outcome="deny",
        reason="no",
        trace=[HookRun(hook_id="a", outcome="continue"), HookRun(hook_id="b", outcome="deny")],
    )
    summary = decision_summary(decision, {b"id": b"r1", b"worker": b"w1"})
    assert summary == {
        "outcome": "deny",
        "reason": "no",
        "hook": "b",
        "degraded": False,
        "worker": "w1",
        "request_id": "r1",
    }
