"""Judge hooks: a verdict from a model the operator chose, against a local fake
OpenAI-compatible server. A deny verdict denies with the model's reason; every way the
model or its server can fail gives the hook's ``on_error`` (deny for this guard), never an
allow; identical requests from fifty sessions make one model call; a slow model never makes
a request miss its deadline; the API key reaches only the server."""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from hookbus import HookBus
from hookbus.bus.settings.loader import Settings
from hookbus.bus.settings.sections import SecuritySettings
from hookbus.bus.wire import Decision, Event
from hookbus.console import charts, data
from hookbus.console.render import Renderer
from hookbus.errors import HookRegistrationError
from hookbus.hooks.actions.llm import judge_stats
from hookbus.hooks.loader import load_hooks
from hookbus.hooks.manifest import parse_toml
from hookbus.hooks.registry import HookRegistry
from tests.approval_helpers import wait_for
from tests.judge_helpers import Answer, fake_judge, verdict, write_judge_hook
from tests.wiped_helpers import chain_worker_cli

KEY = "sk-test-" + "Zq81xLw0pQ"  # an API key that must appear nowhere but the server


def status_text(url: str, ns: str) -> str:
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env.update(HOOKBUS_REDIS_URL=url, HOOKBUS_NAMESPACE=ns, COLUMNS="200")
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    out = subprocess.run(
        [sys.executable, "-m", "hookbus", "status"], env=env, capture_output=True, text=True
    )
    return " ".join(out.stdout.split())


def registry_for(url: str, ns: str, hooks: Path, *, version: str = "v1") -> HookRegistry:
    settings = Settings(redis_url=url, namespace=ns, security=SecuritySettings())
    registry = HookRegistry.for_worker(settings, redis.Redis.from_url(url), notices=False)
    report = load_hooks(hooks)
    assert report.problems == [] and report.enabled, report.problems
    assert registry.replace_dynamic(report.enabled, version=version) == []
    return registry


def ask(registry: HookRegistry, command: str, session: str = "s1") -> Decision:
    event = Event(
        kind="PreToolUse",
        payload={"tool_name": "Bash", "tool_input": {"command": command}},
        session_id=session,
        agent_id="a1",
    )
    return registry.run(event, time_left_s=5.0)


def test_a_deny_verdict_denies_with_the_models_reason_and_the_input_goes_as_data(
    tmp_path: Path, real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    with fake_judge(lambda _: verdict("deny", "it drops the production database")) as judge:
        write_judge_hook(tmp_path, judge.endpoint)
        decision = ask(registry_for(real_redis_url, namespace, tmp_path), "psql prod -c 'drop'")

    assert (decision.outcome, decision.reason) == ("deny", "it drops the production database")
    assert decision.context == [] and decision.updated == {}
    (call,) = judge.calls
    system, user = call["messages"]
    assert system["role"] == "system" and "touch production" in system["content"]
    assert "psql prod" not in system["content"]  # the event never reaches the instructions
    assert json.loads(user["content"]) == {"input": "psql prod -c 'drop'"}
    assert call["model"] == "guard-small" and call["temperature"] == 0
    assert call["response_format"]["json_schema"]["schema"]["required"] == ["outcome", "reason"]


#: Each way a model or its server fails, and the cause the hook's counters file it under.
FAILURES = {
    "not json": (Answer(content="Sure! It looks fine to me."), "answer"),
    "another key": (
        Answer(content='{"outcome": "allow", "reason": "ok", "context": "x"}'),
        "answer",
    ),
    "unknown outcome": (Answer(content='{"outcome": "permit", "reason": "ok"}'), "answer"),
    "empty reason": (Answer(content='{"outcome": "allow", "reason": " "}'), "answer"),
    "a refusal": (Answer(content=None, refusal="I can't help with that."), "answer"),
    "cut at max_tokens": (verdict("allow", "fine", finish_reason="length"), "answer"),
    "HTTP 500": (Answer(body=b'{"error": "boom"}', status=500), "http"),
    "HTTP 400": (Answer(body=b'{"error": "bad response_format"}', status=400), "http"),
    "not a completion": (Answer(body=b'{"object": "list"}'), "answer"),
    "too slow": (verdict("allow", "fine", delay_s=3.0), "timeout"),
}


@pytest.mark.parametrize("failure", list(FAILURES))
def test_every_failure_of_the_model_is_the_guards_on_error_never_an_allow(
    tmp_path: Path, real_redis_url: str, real_redis: redis.Redis, namespace: str, failure: str
) -> None:
    answer, cause = FAILURES[failure]
    name = f"judge-{failure.replace(' ', '-')}"
    with fake_judge(lambda _: answer) as judge:
        write_judge_hook(tmp_path, judge.endpoint, name=name, timeout_s=0.5)
        started = time.monotonic()
        decision = ask(registry_for(real_redis_url, namespace, tmp_path), "ls")
        took = time.monotonic() - started

    assert decision.outcome == "deny", decision
    assert decision.trace[0].outcome in ("error", "timeout"), decision.trace
    assert took < 2.0, took  # the call's timeout, not the model's pace
    assert judge_stats()[name]["failures"] == {cause: 1}


def test_a_dead_port_is_the_guards_on_error(
    tmp_path: Path, real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    write_judge_hook(tmp_path, f"http://127.0.0.1:{port}/v1")
    decision = ask(registry_for(real_redis_url, namespace, tmp_path), "ls")
    assert (decision.outcome, decision.trace[0].outcome) == ("deny", "error"), decision


def test_a_cached_verdict_is_shared_and_never_served_across_a_bundle_change(
    tmp_path: Path, real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    with fake_judge(lambda _: verdict("deny", "production")) as judge:
        write_judge_hook(tmp_path, judge.endpoint, action_extra='cache_ttl = "10m"\n')
        one = registry_for(real_redis_url, namespace, tmp_path)
        other = registry_for(real_redis_url, namespace, tmp_path)  # another worker
        first = ask(one, "kubectl delete ns prod", "s1")
        second = ask(other, "kubectl delete ns prod", "s2")
        other.replace_dynamic(load_hooks(tmp_path).enabled, version="v2")
        after_reload = ask(other, "kubectl delete ns prod", "s3")

    assert [d.outcome for d in (first, second, after_reload)] == ["deny"] * 3
    assert len(judge.calls) == 2, "the second worker asked again, or the reload did not"


def test_fifty_identical_requests_from_fifty_sessions_make_one_model_call(
    tmp_path: Path, real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    slow = verdict("deny", "it restarts production", delay_s=0.3)
    with fake_judge(lambda _: slow) as judge:
        hooks = tmp_path / "hooks"
        write_judge_hook(hooks, judge.endpoint, action_extra='cache_ttl = "10m"\n')
        pushed: list[Decision] = []
        with (
            chain_worker_cli(real_redis_url, namespace, tmp_path, name="a", hooks_dir=hooks),
            chain_worker_cli(real_redis_url, namespace, tmp_path, name="b", hooks_dir=hooks),
        ):

            def agent(n: int) -> None:
                bus = HookBus.from_url(real_redis_url, namespace)
                try:
                    event = Event(
                        kind="PreToolUse",
                        payload={
                            "tool_name": "Bash",
                            "tool_input": {"command": "systemctl restart api"},
                        },
                        session_id=f"session-{n}",
                        agent_id=f"agent-{n % 5}",
                    )
                    pushed.append(bus.request(event, deadline_ms=5000))
                finally:
                    bus.close()

            threads = [threading.Thread(target=agent, args=(n,)) for n in range(50)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(30)
            # the workers' heartbeats say what the judge cost: one call, the rest shared
            wait_for(
                lambda: (
                    "JUDGE prod-judge: 1 model call(s), 49 verdict(s) shared"
                    in status_text(real_redis_url, namespace)
                ),
                15,
                "the judge's counters in hookbus status",
            )
            # the same sums in status --json and on the console's Overview
            settings = Settings(redis_url=real_redis_url, namespace=namespace)
            shown = data.overview(settings)
            cost = shown["judges"]["prod-judge"]
            assert (cost["calls"], cost["served"], cost["failures"]) == (1, 49, {})
            page = Renderer(Path(data.__file__).parent / "templates").render(
                "overview_rows.html", {"s": shown, "chart": charts.activity(settings)}
            )
            assert 'data-judge="prod-judge"><td>prod-judge</td><td>1</td><td>49</td>' in page

    assert len(pushed) == 50
    assert {(d.outcome, d.reason, d.degraded) for d in pushed} == {
        ("deny", "it restarts production", False)
    }
    assert len(judge.calls) == 1, f"{len(judge.calls)} model calls for one input"


def test_a_slow_model_never_makes_a_request_miss_its_deadline(
    tmp_path: Path, real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    with fake_judge(lambda _: verdict("allow", "fine", delay_s=3.0)) as judge:
        hooks = tmp_path / "hooks"
        write_judge_hook(hooks, judge.endpoint)
        with chain_worker_cli(real_redis_url, namespace, tmp_path, hooks_dir=hooks):
            bus = HookBus.from_url(real_redis_url, namespace)
            try:
                event = Event(kind="PreToolUse", payload={"tool_input": {"command": "ls"}})
                started = time.monotonic()
                decision = bus.request(event, deadline_ms=800)
                took = time.monotonic() - started
            finally:
                bus.close()
    assert decision.outcome == "deny", decision
    assert took < 0.8 + 0.3, f"answered after {took:.2f} s"


def test_the_api_key_reaches_the_server_and_nothing_else(
    tmp_path: Path,
    real_redis_url: str,
    real_redis: redis.Redis,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("HOOKBUS_LLM_API_KEY", KEY)
    answers = iter([verdict("deny", "no"), Answer(body=b"{}", status=500)])
    caplog.set_level(logging.DEBUG)
    with fake_judge(lambda _: next(answers)) as judge:
        write_judge_hook(
            tmp_path,
            judge.endpoint,
            extra='[requires]\nenv = ["HOOKBUS_LLM_API_KEY"]\n',
            action_extra='api_key_env = "HOOKBUS_LLM_API_KEY"\n',
        )
        registry = registry_for(real_redis_url, namespace, tmp_path)
        denied = ask(registry, "ls")
        failed = ask(registry, "pwd")

    assert [h.get("authorization") for h in judge.headers] == [f"Bearer {KEY}"] * 2
    shown = json.dumps([denied.trace[0].error, failed.trace[0].error, failed.reason])
    assert KEY not in shown and KEY not in caplog.text
    assert KEY not in (tmp_path / "prod-judge" / "HOOK.toml").read_text()


def test_an_agents_judge_may_name_only_the_keys_the_operator_declared(tmp_path: Path) -> None:
    folder = tmp_path / "h"
    folder.mkdir()
    text = (
        'name = "h"\nevents = ["PreToolUse"]\nauthor = "agent:a1"\n[action.llm]\n'
        'endpoint = "https://judge.example.com/v1"\nmodel = "m"\ninstructions = "judge"\n'
        'api_key_env = "HOOKBUS_REDIS_PASSWORD"\n'
    )
    with pytest.raises(HookRegistrationError, match=r"not in security\.http_header_env"):
        HookRegistry().register_manifest(parse_toml(text, folder / "HOOK.toml"))


def test_hooks_run_tries_a_judge_by_hand(tmp_path: Path) -> None:
    import subprocess
    import sys

    with fake_judge(lambda _: verdict("ask", "it touches the staging cluster")) as judge:
        write_judge_hook(tmp_path, judge.endpoint)
        env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
        event = {"payload": {"tool_name": "Bash", "tool_input": {"command": "helm upgrade"}}}
        out = subprocess.run(
            [
                *(sys.executable, "-m", "hookbus", "hooks", "run", "prod-judge"),
                *("--hooks-dir", str(tmp_path), "--kind", "PreToolUse", "--event", "-"),
                "--json",
            ],
            env=env,
            input=json.dumps(event),
            capture_output=True,
            text=True,
            timeout=60,
        )
    data: Any = json.loads(out.stdout)
    assert out.returncode in (0, 2), out.stderr
    assert "it touches the staging cluster" in json.dumps(data), data
