"""The approval inbox's pure parts: ids, what a parked request stores, who it routes to,
the notification, the console's token and CSRF rules, the lean command's expiry answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from starlette.requests import Request

from hookbus.approvals.model import (
    ApprovalItem,
    operator_decision,
    plan_park,
    summarise_input,
)
from hookbus.approvals.notify import message
from hookbus.bus.keys import approval_id, approval_item, approval_partition
from hookbus.bus.policy.timeout import reason_for
from hookbus.bus.settings.loader import Settings
from hookbus.bus.settings.sections import ApprovalSettings
from hookbus.bus.wire import Decision, Event, HookRun, decode
from hookbus.console.app import is_loopback
from hookbus.console.auth import CSRF_HEADER, ConsoleAuth
from hookbus.harnesses.lean import parked
from hookbus.hooks.manifest_model import manifest_from_data
from hookbus.hooks.registry import HookRegistry
from hookbus.workers.chain.parking import Parking


def test_an_approval_id_names_its_partition() -> None:
    rid = "0123456789abcdef0123456789abcdef"
    assert approval_id(rid, 0) == "0123456789ab"
    assert approval_id(rid, 3) == "0123456789ab.p3"
    assert approval_partition("0123456789ab") == 0
    assert approval_partition("0123456789ab.p3") == 3
    assert approval_item("ns", "0123456789ab.p3") == "hookbus:{ns:3}:approval:0123456789ab.p3"
    for bad in ("xyz", "0123456789ab.p", "0123456789ab.p03", "0123456789AB", "../../etc"):
        with pytest.raises(ValueError):
            approval_partition(bad)


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (
            {"tool_name": "Bash", "tool_input": {"command": "rm  -rf\n/tmp/x"}},
            ("Bash", "rm -rf /tmp/x"),
        ),
        ({"tool_name": "Edit", "tool_input": {"file_path": "a.py", "old": "x"}}, ("Edit", "a.py")),
        ({"tool_name": "X", "tool_input": {"n": 1}}, ("X", '{"n":1}')),
        ({"prompt": "deploy to prod"}, ("", "deploy to prod")),
    ],
)
def test_a_tool_input_is_summarised_by_what_says_the_most(
    payload: dict[str, Any], expected: tuple[str, str]
) -> None:
    assert summarise_input(payload) == expected


def test_a_long_input_is_cut() -> None:
    _, text = summarise_input({"tool_name": "Bash", "tool_input": {"command": "x" * 1000}})
    assert len(text) == 300 and text.endswith("…")


def _plan(policy: str = "deny") -> Any:
    chain = Decision(
        outcome="ask",
        reason="look",
        request_id="r" * 32,
        updated={"tool_input": {"command": "ls"}},
        trace=[HookRun(hook_id="guard", outcome="ask")],
    )
    event = Event(kind="PreToolUse", id="e1", agent_id="a", session_id="s", payload={
        "tool_name": "Bash", "tool_input": {"command": "ls"}})  # fmt: skip
    return chain, plan_park(
        event, chain, approval="abcdefabcdef", hook="guard", now_ms=1_000_000, wait_s=60,
        policy=policy, reply_to="k", mode="s", worker="w", partition=0,
    )  # fmt: skip


def test_a_park_plan_holds_the_first_reply_and_the_expiry_answer() -> None:
    _, plan = _plan()
    assert plan.expires_ms == 1_060_000
    assert plan.first_reply.parked and plan.first_reply.outcome == "ask"
    assert plan.first_reply.approval.wait_ms == 60_000
    assert "hookbus approvals allow|deny abcdefabcdef" in (plan.first_reply.reason or "")
    fields = dict(plan.fields)
    expired = decode(fields["x"], Decision)
    assert (expired.outcome, expired.degraded) == ("deny", True)
    assert expired.reason == "no operator decision within 60 s; policy deny"
    assert expired.approval.state == "expired"
    assert (fields["event_id"], fields["input"], fields["policy"]) == ("e1", "ls", "deny")


def test_an_operators_allow_keeps_the_chains_rewrite_and_a_deny_drops_it() -> None:
    chain, plan = _plan()
    raw = {k.encode(): (v if isinstance(v, bytes) else v.encode()) for k, v in plan.fields}
    item = ApprovalItem.from_hash(raw)
    assert item.waited_ms is None and item.state == "pending"
    allow = operator_decision(
        chain, item, outcome="allow", who="operator:ann", note="", waited_ms=5
    )
    assert allow.updated == chain.updated and allow.reason == "allowed by operator:ann"
    deny = operator_decision(chain, item, outcome="deny", who="operator:bo", note="no", waited_ms=5)
    assert deny.updated == {} and deny.reason == "denied by operator:bo: no"
    assert deny.approval.state == "denied" and deny.approval.waited_ms == 5


def _manifest(name: str, approval: dict[str, Any] | None) -> Any:
    action = {"prompt_inject": {"content": "x"}}
    data: dict[str, Any] = {"name": name, "events": ["PreToolUse"], "action": action}
    if approval is not None:
        data["approval"] = approval
    return manifest_from_data(data, path=Path(f"{name}/HOOK.toml"), folder=Path(name))


@pytest.mark.parametrize(
    ("fleet_route", "approval", "routed"),
    [
        ("agent", None, None),
        ("agent", {"route": "operator", "wait_s": 45}, ("m", 45)),
        ("operator", None, ("m", 120)),
        ("operator", {"route": "agent"}, None),
        ("operator", {"wait_s": 9}, ("m", 9)),
    ],
)
def test_an_ask_routes_by_the_hooks_manifest_else_the_fleets_setting(
    fleet_route: str, approval: dict[str, Any] | None, routed: Any
) -> None:
    settings = Settings(approvals=ApprovalSettings(route=fleet_route, wait_s=120))  # type: ignore[arg-type]
    registry = HookRegistry.from_settings(settings)
    registry.register_manifest(_manifest("m", approval))
    parking = Parking(settings, registry, None, None, "w", None)  # type: ignore[arg-type]
    decision = Decision(outcome="ask", trace=[HookRun(hook_id="m", outcome="ask")])
    found = parking.route(decision)
    assert (found if found is None else (found.hook, found.wait_s)) == routed


def test_a_manifest_may_not_wait_longer_than_ten_minutes() -> None:
    from hookbus.errors import ManifestError

    with pytest.raises(ManifestError, match=r"approval\.wait_s: must be <= 600"):
        _manifest("m", {"route": "operator", "wait_s": 601})


def test_the_notification_is_slack_text_with_a_link_to_the_item() -> None:
    settings = Settings(approvals=ApprovalSettings(console_url="https://ops.example/hb/"))
    _, plan = _plan()
    event = Event(kind="PreToolUse", agent_id="ci-7", payload={
        "tool_name": "Bash", "tool_input": {"command": "make deploy"}})  # fmt: skip
    body = message(settings, "abcdefabcdef", event, plan.first_reply)
    assert body["url"] == "https://ops.example/hb/approvals#abcdefabcdef"
    assert (
        "<https://ops.example/hb/approvals#abcdefabcdef|Open approval abcdefabcdef>" in body["text"]
    )
    assert "ci-7" in body["text"] and "make deploy" in body["text"]


def test_no_operator_is_a_reason_a_person_reads() -> None:
    assert reason_for("no_operator", "deny", deadline_ms=300_000) == (
        "no operator decision within 300 s; policy deny"
    )


def test_the_lean_command_answers_by_policy_when_nobody_decides() -> None:
    first = {"outcome": "ask", "request_id": "r1", "approval": {"id": "a", "wait_ms": 2000}}
    assert parked.is_parked(first)
    assert not parked.is_parked({"outcome": "allow", "approval": {"id": "a", "state": "allowed"}})
    answer = parked._no_operator(first, 2000, "deny")
    assert answer == {
        "outcome": "deny",
        "reason": "no operator decision within 2 s; policy deny",
        "degraded": True,
        "request_id": "r1",
        "approval": {"id": "a", "state": "expired", "waited_ms": 2000},
    }


def _request(headers: dict[str, str], cookie: str | None = None) -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    if cookie:
        raw.append((b"cookie", f"hookbus_console={cookie}".encode()))
    scope = {"type": "http", "method": "POST", "path": "/api/x", "headers": raw,
             "scheme": "http", "server": ("127.0.0.1", 8788), "query_string": b""}  # fmt: skip
    return Request(scope)


def test_the_console_token_and_sessions() -> None:
    with pytest.raises(ValueError):
        ConsoleAuth("short")
    auth = ConsoleAuth("t" * 20)
    assert auth.login("wrong") is None and auth.login(None) is None
    sid = auth.login("t" * 20)
    assert sid is not None and auth.session(sid) is not None
    assert auth.caller(_request({})) is None
    assert auth.caller(_request({"Authorization": "Bearer " + "t" * 20})).bearer
    assert auth.caller(_request({"Authorization": "Bearer " + "x" * 20})) is None
    caller = auth.caller(_request({}, sid))
    assert caller is not None and not caller.bearer
    auth.logout(sid)
    assert auth.caller(_request({}, sid)) is None


def test_a_cookie_post_needs_the_pages_csrf_token_and_the_consoles_own_origin() -> None:
    auth = ConsoleAuth("t" * 20)
    sid = auth.login("t" * 20)
    session = auth.session(sid)
    assert session is not None
    caller = auth.caller(_request({}, sid))
    assert caller is not None
    csrf = {CSRF_HEADER: session.csrf}
    assert not auth.may_change(_request({}, sid), caller)
    assert not auth.may_change(_request({CSRF_HEADER: "nope"}, sid), caller)
    assert auth.may_change(_request(csrf, sid), caller)
    own = {**csrf, "Origin": "http://127.0.0.1:8788"}
    assert auth.may_change(_request(own, sid), caller)
    evil = {**csrf, "Origin": "http://evil.example"}
    assert not auth.may_change(_request(evil, sid), caller)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("10.0.0.5", False),
        ("example.com", False),
        ("", False),
    ],
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_the_walkthroughs_hook_asks_about_deploys_and_routes_them_to_the_operator() -> None:
    from hookbus.hooks.loader import load_hooks

    root = Path(__file__).resolve().parents[2] / "examples" / "claude-code" / "hooks"
    settings = Settings()
    registry = HookRegistry.from_settings(settings)
    report = load_hooks(root)
    assert report.ok, report.problems
    for manifest in report.hooks:
        registry.register_manifest(manifest)
    command = {"command": "terraform apply -auto-approve"}
    deploy = Event(kind="PreToolUse", payload={"tool_name": "Bash", "tool_input": command})
    decision = registry.run(deploy)
    assert decision.outcome == "ask"
    assert decision.reason == "a person must approve Bash: terraform apply -auto-approve"
    parking = Parking(settings, registry, None, None, "w", None)  # type: ignore[arg-type]
    routed = parking.route(decision)
    assert routed is not None and (routed.hook, routed.wait_s) == ("ask-before-deploy", 300)
    harmless = Event(kind="PreToolUse", payload={
        "tool_name": "Bash", "tool_input": {"command": "terraform plan"}})  # fmt: skip
    assert registry.run(harmless).outcome == "allow"
