"""Every waiting producer gets the operator's decision: ``hookbus publish --wait``, the
agent-CLI hook command (Claude Code's PermissionRequest and PreToolUse), the HTTP gateway;
expiry answers with the policy at ``wait_s``; parked requests outlive a SIGKILLed chain
worker, live in their partition and work on a Redis Cluster; a POST announces each."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
import redis
from starlette.testclient import TestClient

from hookbus import HookBus
from hookbus.approvals.inbox import ApprovalInbox
from hookbus.bus.keys import approval_partition, partition_of
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event
from hookbus.harnesses.gateway import create_app
from tests.approval_helpers import (
    ask_payload,
    claude_event,
    cli,
    finish,
    kill_worker,
    parked,
    settings_for,
    start_hook,
    start_worker,
    stop_worker,
    wait_alive,
    wait_for,
)


@pytest.fixture
def fleet(real_redis_url: str, real_redis: redis.Redis, namespace: str) -> Iterator[str]:
    proc = start_worker(real_redis_url, namespace)
    try:
        wait_alive(real_redis, namespace, proc)
        yield namespace
    finally:
        stop_worker(proc)


def test_publish_wait_prints_the_operators_decision(real_redis_url: str, fleet: str) -> None:
    inbox = ApprovalInbox(settings_for(real_redis_url, fleet))
    for verb, code in (("allow", 0), ("deny", 2)):
        waiting = start_publish(real_redis_url, fleet)
        (item,) = parked(inbox)
        assert cli(real_redis_url, fleet, "approvals", verb, item.id).returncode == 0
        out, err = waiting.communicate(timeout=30)
        assert waiting.returncode == code, err
        decision = json.loads(out)
        assert decision["outcome"] == verb
        assert decision["approval"]["id"] == item.id
        assert f"parked for an operator as approval {item.id}" in err


def start_publish(url: str, ns: str) -> Any:
    import os
    import subprocess
    import sys

    from tests.approval_helpers import ROOT

    env = dict(os.environ, HOOKBUS_REDIS_URL=url, HOOKBUS_NAMESPACE=ns, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hookbus",
            "--json",
            "publish",
            "PreToolUse",
            "--wait",
            "--payload",
            json.dumps(ask_payload()),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


@pytest.mark.parametrize("name", ["PreToolUse", "PermissionRequest"])
def test_the_claude_code_hook_waits_for_the_operator_and_renders_the_allow(
    real_redis_url: str, fleet: str, name: str
) -> None:
    inbox = ApprovalInbox(settings_for(real_redis_url, fleet))
    hook = start_hook(real_redis_url, fleet, claude_event(name, "ASK_ME deploy"), "--timeout", "60")
    (item,) = parked(inbox)
    assert item.kind == name and item.input == "ASK_ME deploy"
    inbox.decide(item.id, "allow", who="ann", note="go")
    code, out, err = finish(hook)
    assert code == 0, err
    specific = out["hookSpecificOutput"]
    if name == "PreToolUse":
        assert specific["permissionDecision"] == "allow"
        assert specific["permissionDecisionReason"] == "allowed by operator:ann: go"
    else:
        assert specific["decision"] == {"behavior": "allow"}


@pytest.mark.parametrize("name", ["PreToolUse", "PermissionRequest"])
def test_the_claude_code_hook_renders_the_operators_deny(
    real_redis_url: str, fleet: str, name: str
) -> None:
    inbox = ApprovalInbox(settings_for(real_redis_url, fleet))
    hook = start_hook(
        real_redis_url, fleet, claude_event(name, "ASK_ME drop db"), "--timeout", "60"
    )
    (item,) = parked(inbox)
    assert cli(real_redis_url, fleet, "approvals", "deny", item.id, "-r", "no").returncode == 0
    _, out, _ = finish(hook)
    specific = out["hookSpecificOutput"]
    if name == "PreToolUse":
        assert specific["permissionDecision"] == "deny"
        assert "no" in specific["permissionDecisionReason"]
    else:
        assert specific["decision"]["behavior"] == "deny"


def test_the_gateway_holds_the_http_request_until_the_operator_decides(
    real_redis_url: str, fleet: str
) -> None:
    inbox = ApprovalInbox(settings_for(real_redis_url, fleet))
    settings = Settings(redis_url=real_redis_url, namespace=fleet)
    answers: list[Any] = []
    with TestClient(create_app(settings)) as client:

        def post() -> None:
            data = claude_event("PreToolUse", "ASK_ME ship it")
            answers.append(client.post("/v1/hooks/claude-code?timeout=60", json=data).json())

        thread = threading.Thread(target=post, daemon=True)
        thread.start()
        (item,) = parked(inbox)
        time.sleep(0.3)
        assert thread.is_alive()
        inbox.decide(item.id, "allow", who="ann")
        thread.join(15)
    assert answers[0]["hookSpecificOutput"]["permissionDecision"] == "allow"


def test_nobody_deciding_gives_the_degraded_policy_answer_at_wait_s(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    proc = start_worker(real_redis_url, namespace, wait_s=2)
    try:
        wait_alive(real_redis, namespace, proc)
        settings = settings_for(real_redis_url, namespace)
        inbox = ApprovalInbox(settings)
        with HookBus.from_settings(settings) as bus:
            started = time.monotonic()
            decision = bus.request(Event(kind="PreToolUse", payload=ask_payload()))
            took = time.monotonic() - started
        hook = start_hook(
            real_redis_url, namespace, claude_event("PreToolUse", "ASK_ME x"), "--timeout", "30"
        )
        _, out, _ = finish(hook)
    finally:
        stop_worker(proc)
    assert decision.outcome == "deny" and decision.degraded
    assert decision.reason == "no operator decision within 2 s; policy deny"
    assert decision.approval is not None and decision.approval.state == "expired"
    assert 1.9 < took < 3.5, took  # the sweep answers at 2 s; the producer itself by 3 s
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert (
        "no operator decision within 2 s" in out["hookSpecificOutput"]["permissionDecisionReason"]
    )
    assert inbox.pending() == []
    expired = inbox.recent()
    assert [i.state for i in expired] == ["expired", "expired"]
    refused = cli(real_redis_url, namespace, "approvals", "allow", expired[0].id)
    assert refused.returncode == 1 and "expired" in refused.stderr


def test_a_sigkilled_chain_worker_loses_no_parked_request(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    proc = start_worker(real_redis_url, namespace)
    settings = settings_for(real_redis_url, namespace)
    inbox = ApprovalInbox(settings)
    answers: list[Any] = []
    try:
        wait_alive(real_redis, namespace, proc)
        with HookBus.from_settings(settings) as bus:
            threads = [
                threading.Thread(
                    target=lambda i=i: answers.append(
                        bus.request(Event(kind="PreToolUse", payload=ask_payload(f"job {i}")))
                    ),
                    daemon=True,
                )
                for i in range(3)
            ]
            for thread in threads:
                thread.start()
            items = parked(inbox, 3)
            kill_worker(proc)  # no worker at all now: the decisions need none
            for item in items:
                inbox.decide(item.id, "allow", who="ann")
            for thread in threads:
                thread.join(10)
    finally:
        stop_worker(proc)
    assert sorted(d.outcome for d in answers) == ["allow"] * 3
    assert all(d.approval.decided_by == "operator:ann" for d in answers)


def test_parked_requests_live_in_their_sessions_partition(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    proc = start_worker(real_redis_url, namespace, partitions=3)
    settings = settings_for(real_redis_url, namespace, partitions=3)
    inbox = ApprovalInbox(settings)
    sessions = {}
    for n in range(200):  # a session for each partition
        sessions.setdefault(partition_of(f"s{n}", 3), f"s{n}")
    answers: list[Any] = []
    try:
        wait_alive(real_redis, namespace, proc)
        with HookBus.from_settings(settings) as bus:
            threads = [
                threading.Thread(
                    target=lambda s=s: answers.append(
                        bus.request(Event(kind="PreToolUse", session_id=s, payload=ask_payload()))
                    ),
                    daemon=True,
                )
                for s in sessions.values()
            ]
            for thread in threads:
                thread.start()
            items = parked(inbox, 3)
            assert {approval_partition(i.id) for i in items} == {0, 1, 2}
            for item in items:
                assert approval_partition(item.id) == partition_of(item.session, 3)
                done = cli(real_redis_url, namespace, "approvals", "allow", item.id, partitions=3)
                assert done.returncode == 0, done.stderr
            for thread in threads:
                thread.join(10)
    finally:
        stop_worker(proc)
        for key in real_redis.scan_iter(match=f"hookbus:{{{namespace}:*"):
            real_redis.delete(key)
    assert [d.outcome for d in answers] == ["allow"] * 3


class _Catcher(http.server.BaseHTTPRequestHandler):
    bodies: ClassVar[list[Any]] = []

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        type(self).bodies.append(json.loads(self.rfile.read(length)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.mark.parametrize("allowlisted", [True, False])
def test_a_parked_request_is_announced_by_a_post_through_the_guarded_egress(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, allowlisted: bool
) -> None:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Catcher)
    _Catcher.bodies = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    proc = start_worker(
        real_redis_url,
        namespace,
        notify_url=url,
        allow_hosts=("127.0.0.1",) if allowlisted else (),
    )
    settings = settings_for(real_redis_url, namespace)
    inbox = ApprovalInbox(settings)
    try:
        wait_alive(real_redis, namespace, proc)
        with HookBus.from_settings(settings) as bus:
            thread = threading.Thread(
                target=bus.request,
                args=(Event(kind="PreToolUse", agent_id="ci-7", payload=ask_payload()),),
                daemon=True,
            )
            thread.start()
            (item,) = parked(inbox)
            if allowlisted:
                wait_for(lambda: _Catcher.bodies, what="the notification")
            else:
                time.sleep(1.0)  # it would have come by now
            inbox.decide(item.id, "deny", who="ann")
            thread.join(10)
    finally:
        stop_worker(proc)
        server.shutdown()
        server.server_close()
    if not allowlisted:  # loopback is not a public address: the egress check refuses it
        assert _Catcher.bodies == []
        return
    (body,) = _Catcher.bodies
    assert body["approval"]["id"] == item.id
    assert "ci-7" in body["text"] and "rm -rf build" in body["text"]
    assert f"http://127.0.0.1:8788/approvals#{item.id}" in body["text"]
    assert body["url"] == f"http://127.0.0.1:8788/approvals#{item.id}"


def test_parked_requests_are_decided_on_a_redis_cluster() -> None:
    from hookbus.bus.connection import node_url
    from hookbus.bus.keys import approvals_pending
    from tests.cluster_fixture import local_cluster, namespace_spread

    with local_cluster(3) as cluster:
        ns = namespace_spread(cluster.url, 3)
        settings = settings_for(cluster.url, ns, partitions=3)
        homes = {node_url(cluster.url, approvals_pending(ns, p)) for p in range(3)}
        assert len(homes) == 3  # each partition's inbox on its own master
        proc = start_worker(cluster.url, ns, partitions=3)
        inbox = ApprovalInbox(settings)
        sessions: dict[int, str] = {}
        for n in range(200):
            sessions.setdefault(partition_of(f"s{n}", 3), f"s{n}")
        answers: list[Any] = []
        try:
            with HookBus.from_settings(settings) as bus:
                wait_for(lambda: bus.workers_alive(), 30, "a chain worker on the cluster")
                threads = [
                    threading.Thread(
                        target=lambda s=s: answers.append(
                            bus.request(
                                Event(kind="PreToolUse", session_id=s, payload=ask_payload())
                            )
                        ),
                        daemon=True,
                    )
                    for s in sessions.values()
                ]
                for thread in threads:
                    thread.start()
                items = parked(inbox, 3, timeout_s=30)
                for item, verb in zip(items, ("allow", "deny", "allow"), strict=True):
                    inbox.decide(item.id, verb, who="ann")
                for thread in threads:
                    thread.join(10)
        finally:
            stop_worker(proc)
    assert sorted(d.outcome for d in answers) == ["allow", "allow", "deny"]


def test_with_no_worker_left_to_expire_it_the_producer_answers_by_policy_itself(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    import asyncio

    from hookbus import AsyncHookBus

    proc = start_worker(real_redis_url, namespace, wait_s=1)
    settings = settings_for(real_redis_url, namespace)
    inbox = ApprovalInbox(settings)
    answers: dict[str, Any] = {}

    async def ask_async() -> Any:
        async with AsyncHookBus.from_settings(settings) as abus:
            return await abus.request(Event(kind="PreToolUse", payload=ask_payload("async")))

    try:
        wait_alive(real_redis, namespace, proc)
        with HookBus.from_settings(settings) as bus:
            threads = [
                threading.Thread(
                    target=lambda: answers.update(
                        sync=bus.request(Event(kind="PreToolUse", payload=ask_payload("sync")))
                    ),
                    daemon=True,
                ),
                threading.Thread(
                    target=lambda: answers.update(aio=asyncio.run(ask_async())), daemon=True
                ),
            ]
            for thread in threads:
                thread.start()
            parked(inbox, 2)
            started = time.monotonic()
            kill_worker(proc)  # nobody sweeps: the producers keep time themselves
            for thread in threads:
                thread.join(10)
            took = time.monotonic() - started
    finally:
        stop_worker(proc)
    for name in ("sync", "aio"):
        decision = answers[name]
        assert decision.outcome == "deny" and decision.degraded, name
        assert decision.reason == (
            f"no operator decision within 1 s (namespace '{namespace}' at {real_redis_url}); "
            "policy deny"
        ), name
        assert decision.approval.state == "expired", name
    assert took < 4, took


def test_a_hook_entry_shorter_than_wait_s_ends_the_wait_and_says_why(
    real_redis_url: str, fleet: str
) -> None:
    started = time.monotonic()
    hook = start_hook(
        real_redis_url, fleet, claude_event("PreToolUse", "ASK_ME x"), "--timeout", "3"
    )
    _, out, _ = finish(hook)
    took = time.monotonic() - started
    reason = out["hookSpecificOutput"]["permissionDecisionReason"]
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "hook entry's timeout" in reason and "610 s" in reason
    assert took < 3.5, took  # within the entry's 3 s (plus the process's own start)


@pytest.mark.parametrize(
    ("cli_name", "name"), [("gemini-cli", "BeforeTool"), ("codex", "PreToolUse")]
)
@pytest.mark.parametrize("verb", ["allow", "deny"])
def test_the_gemini_and_codex_hooks_wait_for_the_operator_too(
    real_redis_url: str, fleet: str, cli_name: str, name: str, verb: str
) -> None:
    from tests.approval_helpers import ROOT

    folder = "gemini_cli" if cli_name == "gemini-cli" else "codex"
    data = json.loads((ROOT / "tests" / "fixtures" / folder / f"{name}.json").read_text())
    data["tool_input"] = dict(data.get("tool_input") or {}, command="ASK_ME kubectl delete ns x")
    inbox = ApprovalInbox(settings_for(real_redis_url, fleet))
    hook = start_hook(real_redis_url, fleet, data, "--timeout", "60", cli_name=cli_name)
    (item,) = parked(inbox)
    inbox.decide(item.id, verb, who="ann", note="checked")
    code, out, err = finish(hook)
    assert code == 0, err
    text = json.dumps(out or {})
    if verb == "deny":
        assert '"deny"' in text and "denied by operator:ann: checked" in text
    else:
        assert '"deny"' not in text  # the call goes ahead
