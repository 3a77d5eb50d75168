"""Rules for who may approve, like a deployment's required reviewers: an approval that needs
two operators is answered only once two different operators allowed it, each with a token
of their own; a second allow by the same operator is refused, so is an operator the rules
do not name; one deny denies. Every answer is recorded with who, from where and the digest
of the input it applied to. A real chain worker and console, each operator's own token."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from hookbus import HookBus
from hookbus.approvals.inbox import ApprovalInbox
from hookbus.bundles import history
from hookbus.bus.wire import Decision, Event
from tests.approval_helpers import cli, parked, settings_for, wait_for
from tests.console_helpers import ConsoleProc, chromium
from tests.wiped_helpers import chain_worker_cli

#: Each operator's console token.
TOKENS = {"ann": "ann-" + "t" * 28, "bob": "bob-" + "u" * 28, "eve": "eve-" + "v" * 28}

ASKING_HOOK = """\
name = "two-person-deploy"
events = ["PreToolUse"]

[approval]
route = "operator"
wait_s = 60
approvers = 2
operators = ["ann", "bob"]

[action.python]
entrypoint = "ask:check"
"""


@pytest.fixture
def fleet(
    tmp_path: Path, real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> Iterator[Path]:
    hooks = tmp_path / "hooks"
    (hooks / "two-person-deploy").mkdir(parents=True)
    (hooks / "two-person-deploy" / "HOOK.toml").write_text(ASKING_HOOK)
    (hooks / "two-person-deploy" / "ask.py").write_text(
        "def check(event):\n    return {'outcome': 'ask', 'reason': 'two people sign a deploy'}\n"
    )
    with chain_worker_cli(real_redis_url, namespace, tmp_path, hooks_dir=hooks):
        yield hooks


@pytest.fixture
def console(
    tmp_path: Path, real_redis_url: str, namespace: str, fleet: Path
) -> Iterator[ConsoleProc]:
    tokens = tmp_path / "operators"
    tokens.write_text("".join(f"{name} {token}\n" for name, token in TOKENS.items()))
    tokens.chmod(0o600)
    proc = ConsoleProc(real_redis_url, namespace, fleet, tokens_file=tokens)
    try:
        yield proc
    finally:
        proc.stop()


def ask_in_background(url: str, ns: str, command: str) -> tuple[threading.Thread, list[Decision]]:
    out: list[Decision] = []

    def agent() -> None:
        bus = HookBus.from_url(url, ns)
        try:
            payload = {"tool_name": "Bash", "tool_input": {"command": command}}
            out.append(bus.request(Event(kind="PreToolUse", payload=payload, agent_id="ci-1")))
        finally:
            bus.close()

    thread = threading.Thread(target=agent, daemon=True)
    thread.start()
    return thread, out


def answer(console: ConsoleProc, name: str, approval: str, decision: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {TOKENS[name]}"}
    with httpx.Client(base_url=console.base, headers=headers, timeout=10) as api:
        return api.post(f"/api/approvals/{approval}", json={"decision": decision})


def test_an_approval_needing_two_operators_waits_for_two_different_ones(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, console: ConsoleProc
) -> None:
    inbox = ApprovalInbox(settings_for(real_redis_url, namespace))
    thread, out = ask_in_background(real_redis_url, namespace, "helm upgrade prod")
    (item,) = parked(inbox)

    first = answer(console, "ann", item.id, "allow")
    again = answer(console, "ann", item.id, "allow")
    outsider = answer(console, "eve", item.id, "allow")
    still: Any = inbox.pending()
    second = answer(console, "bob", item.id, "allow")
    thread.join(15)

    assert first.status_code == 200 and first.json()["state"] == "pending", first.text
    assert first.json()["allowed_by"] == ["operator:ann"]
    assert again.status_code == 409 and "allowed it already" in again.json()["error"]
    assert (
        outsider.status_code == 409
        and "may not answer" in again.json()["error"] + outsider.json()["error"]
    )
    assert [i.id for i in still] == [item.id], "one allow of two decided it"
    assert second.status_code == 200 and second.json()["state"] == "allowed", second.text
    (decision,) = out
    assert decision.outcome == "allow"
    assert "operator:ann and operator:bob" in (decision.reason or "")
    answers = [e for e in history.read(real_redis, namespace) if e.action == "decide"]
    digest = hashlib.sha256(item.full_input.encode()).hexdigest()
    assert [(e.actor, e.extra["outcome"], e.extra["via"]) for e in answers] == [
        ("operator:ann", "allow-once", "console"),
        ("operator:bob", "allow", "console"),
    ]
    assert {e.extra["input_sha256"] for e in answers} == {digest}
    # the audit trail, exported as JSON lines: the same answers, who, from where, the input
    done = cli(real_redis_url, namespace, "approvals", "export", "--since", "1h")
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["by"], r["outcome"], r["via"], r["approval"]) for r in lines] == [
        ("operator:ann", "allow-once", "console", item.id),
        ("operator:bob", "allow", "console", item.id),
    ]
    assert {r["input_sha256"] for r in lines} == {digest}
    assert lines[1]["allowed_by"] == ["operator:ann"] and lines[1]["prev"] == lines[0]["hash"]
    later = cli(real_redis_url, namespace, "approvals", "export", "--since", "2999-01-01")
    assert later.returncode == 0 and later.stdout == ""
    wrong = cli(real_redis_url, namespace, "approvals", "export", "--since", "last week")
    assert wrong.returncode == 64 and "neither a duration" in wrong.stderr


def test_one_deny_of_the_named_operators_denies(
    real_redis_url: str, namespace: str, console: ConsoleProc
) -> None:
    inbox = ApprovalInbox(settings_for(real_redis_url, namespace))
    thread, out = ask_in_background(real_redis_url, namespace, "terraform apply prod")
    (item,) = parked(inbox)
    assert answer(console, "ann", item.id, "allow").status_code == 200
    denied = answer(console, "bob", item.id, "deny")
    thread.join(15)
    assert denied.status_code == 200 and denied.json()["state"] == "denied"
    assert out[0].outcome == "deny"
    wait_for(lambda: not inbox.pending(), 5, "the item decided")


SELF_HOOK = """\
name = "not-your-own"
events = ["PreToolUse"]

[approval]
route = "operator"
wait_s = 60
forbid_requester = true

[action.python]
entrypoint = "ask:check"
"""


def test_the_asking_agents_own_operator_may_not_answer_when_the_approval_forbids_it(
    tmp_path: Path, real_redis_url: str, namespace: str
) -> None:
    hooks = tmp_path / "own-hooks"
    (hooks / "not-your-own").mkdir(parents=True)
    (hooks / "not-your-own" / "HOOK.toml").write_text(SELF_HOOK)
    (hooks / "not-your-own" / "ask.py").write_text(
        "def check(event):\n    return {'outcome': 'ask', 'reason': 'someone else signs'}\n"
    )
    tokens = tmp_path / "operators"
    tokens.write_text("".join(f"{name} {token}\n" for name, token in TOKENS.items()))
    tokens.chmod(0o600)
    inbox = ApprovalInbox(settings_for(real_redis_url, namespace))
    with chain_worker_cli(real_redis_url, namespace, tmp_path, hooks_dir=hooks):
        proc = ConsoleProc(real_redis_url, namespace, hooks, tokens_file=tokens)
        try:
            out: list[Decision] = []

            def agent() -> None:  # the agent "ann" runs on behalf of the operator ann
                with HookBus.from_url(real_redis_url, namespace) as bus:
                    payload = {"tool_name": "Bash", "tool_input": {"command": "make release"}}
                    out.append(
                        bus.request(Event(kind="PreToolUse", payload=payload, agent_id="ann"))
                    )

            thread = threading.Thread(target=agent, daemon=True)
            thread.start()
            (item,) = parked(inbox)
            own = answer(proc, "ann", item.id, "allow")
            assert own.status_code == 409 and "own operator identity" in own.json()["error"]
            assert [i.id for i in inbox.pending()] == [item.id]  # nothing changed
            other = answer(proc, "bob", item.id, "allow")
            thread.join(15)
        finally:
            proc.stop()
    assert other.status_code == 200 and other.json()["state"] == "allowed", other.text
    assert out[0].outcome == "allow" and "operator:bob" in (out[0].reason or "")


def test_in_chromium_two_operators_each_with_their_own_token_allow_and_a_second_allow_is_refused(
    real_redis_url: str, namespace: str, console: ConsoleProc
) -> None:
    inbox = ApprovalInbox(settings_for(real_redis_url, namespace))
    thread, out = ask_in_background(real_redis_url, namespace, "helm upgrade prod --atomic")
    (item,) = parked(inbox)
    card = f'[data-approval="{item.id}"]'
    with chromium() as browser:
        pages = {}
        for name in ("ann", "bob"):  # a browser session each, logged in with their own token
            context = browser.new_context()
            page = context.new_page()
            page.goto(f"{console.base}/?token={TOKENS[name]}")
            page.goto(f"{console.base}/approvals")
            page.wait_for_selector(card, timeout=10_000)
            pages[name] = page
        pages["ann"].click(f"{card} button[data-decide=allow]")
        pages["ann"].wait_for_selector(f"{card} >> text=1 of 2 operators", timeout=5_000)
        assert thread.is_alive() and [i.id for i in inbox.pending()] == [item.id]
        pages["ann"].reload()  # the same operator, once more
        pages["ann"].click(f"{card} button[data-decide=allow]")
        pages["ann"].wait_for_selector(f"{card} >> text=allowed it already", timeout=5_000)
        assert thread.is_alive()
        pages["bob"].click(f"{card} button[data-decide=allow]")
        pages["bob"].wait_for_selector(f"{card} >> text=allowed by operator:", timeout=5_000)
        thread.join(15)
    (decision,) = out
    assert decision.outcome == "allow"
    assert "operator:ann and operator:bob" in (decision.reason or "")
