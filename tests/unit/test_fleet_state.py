"""Fleet-wide state as a hook sees it: key templates and durations, the manifest sections,
and the limit / lock / escalation checks of a registry (on a fake Redis: the scripts are the
same Lua the real server runs)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fakeredis
import pytest

from hookbus.bus.wire import Event
from hookbus.errors import FleetStateError, ManifestError
from hookbus.hooks.manifest import parse_toml as parse_manifest_text
from hookbus.hooks.registry import HookRegistry
from hookbus.state import fleet
from hookbus.state.store import FleetState, limit_id, lock_id
from hookbus.state.templates import compile_template, parse_duration


class FakeState(FleetState):
    """A FleetState whose checks run on one FakeRedis (the real Lua, no network)."""

    def __init__(self, client: fakeredis.FakeRedis) -> None:
        super().__init__("redis://fake:6379/0", "ns")
        self.fake = client

    def _client(self, key: str) -> Any:
        return self.fake


@pytest.fixture
def state() -> Iterator[FakeState]:
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer(), protocol=2)
    yield FakeState(client)
    client.close()


def _registry(state: FleetState | None, *manifests: str) -> HookRegistry:
    registry = HookRegistry()
    registry.fleet_state = state
    parsed = [
        parse_manifest_text(text, Path(f"/hooks/h{i}/HOOK.toml"))
        for i, text in enumerate(manifests)
    ]
    errors = registry.replace_dynamic(parsed)
    assert not errors, errors
    return registry


def _bash(session: str, agent: str = "a1", command: str = "ls", **extra: Any) -> Event:
    return Event(
        kind="PreToolUse",
        session_id=session,
        agent_id=agent,
        payload={"tool_name": "Bash", "tool_input": {"command": command, **extra}},
    )


LIMIT = """
name = "budget"
events = ["PreToolUse"]
[limit]
key = "{agent}:{tool}"
max = 3
per = "1h"
"""

LOCK = """
name = "deploy-lock"
events = ["PreToolUse"]
[match]
tools = ["Bash"]
[lock]
key = "deploy:{payload.tool_input.environment}"
ttl = "15m"
release_on = ["PostToolUse", "SessionEnd"]
"""

ESCALATE = """
name = "three-strikes"
events = ["PreToolUse"]
[escalate]
after = 3
within = "10m"
of = "deny"
per = "session"
then = "halt"
"""

DENY_RM = """
name = "no-rm"
events = ["PreToolUse"]
[match.tool_input]
command = "rm*"
[action.prompt_inject]
content = "x"
"""


def test_durations_read_as_people_write_them() -> None:
    assert parse_duration("500ms") == 500
    assert parse_duration("30s") == 30_000
    assert parse_duration("15m") == 900_000
    assert parse_duration("1h") == 3_600_000
    assert parse_duration("2d") == 172_800_000
    for bad in ("", "1 week", "-1s", "0s", "31d", "1h30m"):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_a_template_renders_the_event_and_an_absent_field_leaves_the_event_out_of_the_rule() -> (
    None
):
    render = compile_template("deploy:{payload.tool_input.environment}:{agent}")
    assert render(_bash("s", environment="prod")) == "deploy:prod:a1"
    assert render(_bash("s")) is None  # no environment: the rule does not apply
    # a session is its agent's: {session} renders AGENT/SESSION
    assert compile_template("{tool}/{kind}/{session}")(_bash("s9")) == "Bash/PreToolUse/a1/s9"
    long = compile_template("{payload.tool_input.command}")(_bash("s", command="x" * 5000))
    assert long is not None and len(long) <= 200


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ('[limit]\nkey = "{user}"\nmax = 1\nper = "1h"', "unknown field {user}"),
        ('[limit]\nkey = "{agent}"\nmax = 0\nper = "1h"', "limit.max"),
        ('[limit]\nkey = "{agent}"\nmax = 1\nper = "soon"', "not a duration"),
        ('[lock]\nkey = "x"\nttl = "1h"\nrelease_on = ["NoSuchThing"]', "unknown event kind"),
        ('[escalate]\nafter = 3\nwithin = "1h"\nthen = "allow"', "escalate.then"),
    ],
)
def test_bad_rules_are_refused_with_the_field_named(section: str, message: str) -> None:
    text = f'name = "r"\nevents = ["PreToolUse"]\n{section}\n'
    with pytest.raises(ManifestError, match=message.replace("{", r"\{").replace("}", r"\}")):
        parse_manifest_text(text, Path("/hooks/r/HOOK.toml"))


def test_a_hook_that_is_only_its_rules_needs_no_action() -> None:
    manifest = parse_manifest_text(LIMIT, Path("/hooks/budget/HOOK.toml"))
    assert manifest.action.kind == "none"
    with pytest.raises(ManifestError, match=r"action\.none"):
        parse_manifest_text(
            'name = "x"\nevents = ["Stop"]\n[action.none]\n', Path("/h/x/HOOK.toml")
        )


def test_the_limit_lets_exactly_max_requests_through_and_says_when_it_frees_up(
    state: FakeState,
) -> None:
    registry = _registry(state, LIMIT)
    answers = [registry.run(_bash(f"s{i}"), time_left_s=1.0) for i in range(5)]
    assert [d.outcome for d in answers] == ["allow", "allow", "allow", "deny", "deny"]
    assert "limit 'a1:Bash' reached: 3 of 3 per 1h" in (answers[3].reason or "")
    assert "frees up in" in (answers[3].reason or "")
    # another agent has its own budget
    assert registry.run(_bash("s9", agent="a2"), time_left_s=1.0).outcome == "allow"


def test_a_redelivered_request_is_not_counted_twice(state: FakeState) -> None:
    registry = _registry(state, LIMIT)
    event = _bash("s1")
    for _ in range(5):
        assert registry.run(event, time_left_s=1.0).outcome == "allow"


def test_one_session_holds_the_lock_until_its_release_event(state: FakeState) -> None:
    registry = _registry(state, LOCK)
    first = registry.run(_bash("s1", environment="prod"), time_left_s=1.0)
    second = registry.run(_bash("s2", agent="a2", environment="prod"), time_left_s=1.0)
    assert first.outcome == "allow"
    assert second.outcome == "deny"
    assert "held by agent 'a1' since" in (second.reason or "")
    assert "'s1'" not in (second.reason or "")
    # the holder may go on; staging is another lock
    assert registry.run(_bash("s1", environment="prod"), time_left_s=1.0).outcome == "allow"
    assert registry.run(_bash("s2", environment="staging"), time_left_s=1.0).outcome == "allow"
    # another session's PostToolUse releases nothing, nor another agent's of the holder's
    # session id (nor one without an agent); the holder's does
    payload = {"tool_name": "Bash", "tool_input": {"environment": "prod"}}
    for session, agent in (("s2", "a1"), ("s1", "a2"), ("s1", None)):
        post = Event(kind="PostToolUse", session_id=session, agent_id=agent, payload=payload)
        registry.run(post, time_left_s=1.0, blocking=False)
        assert registry.run(_bash("s3", environment="prod"), time_left_s=1.0).outcome == "deny"
    assert registry.run(_bash("s1", agent="a2", environment="prod"), time_left_s=1.0).outcome == (
        "deny"
    )
    registry.run(
        Event(kind="PostToolUse", session_id="s1", agent_id="a1", payload=payload),
        time_left_s=1.0,
        blocking=False,
    )
    assert registry.run(_bash("s3", environment="prod"), time_left_s=1.0).outcome == "allow"


def test_a_request_refused_by_the_limit_keeps_no_lock_it_just_took(state: FakeState) -> None:
    both = LOCK.replace("[lock]", '[limit]\nkey = "{tool}"\nmax = 1\nper = "1h"\n[lock]')
    registry = _registry(state, both)
    assert registry.run(_bash("s1", environment="a"), time_left_s=1.0).outcome == "allow"
    refused = registry.run(_bash("s2", environment="b"), time_left_s=1.0)
    assert refused.outcome == "deny" and "limit" in (refused.reason or "")
    assert state.get(lock_id("deploy:b")) is None


def test_escalation_halts_a_session_on_its_third_deny_and_leaves_others_alone(
    state: FakeState,
) -> None:
    deny = DENY_RM.replace(
        '[action.prompt_inject]\ncontent = "x"', '[limit]\nkey = "{session}"\nmax = 1\nper = "1h"'
    )
    registry = _registry(state, ESCALATE, deny)
    registry.run(_bash("s1", command="rm a"), time_left_s=1.0)  # counted, allowed
    outcomes = [
        registry.run(_bash("s1", command="rm a"), time_left_s=1.0).outcome for _ in range(3)
    ]
    assert outcomes == ["deny", "deny", "halt"]
    other = registry.run(_bash("s2", command="rm a"), time_left_s=1.0)
    assert other.outcome == "allow"
    # another agent's session of the id s1 is its own: its first refusal is a deny
    registry.run(_bash("s1", agent="a2", command="rm a"), time_left_s=1.0)
    assert registry.run(_bash("s1", agent="a2", command="rm a"), time_left_s=1.0).outcome == (
        "deny"
    )


def test_a_shadow_limit_records_what_it_would_refuse_and_refuses_nothing(state: FakeState) -> None:
    shadow = LIMIT.replace('name = "budget"', 'name = "budget"\nmode = "shadow"')
    registry = _registry(state, shadow)
    answers = [registry.run(_bash(f"s{i}"), time_left_s=1.0) for i in range(4)]
    assert [d.outcome for d in answers] == ["allow"] * 4
    assert answers[3].shadow and answers[3].shadow[0].outcome == "deny"


def test_redis_failing_inside_a_limit_is_the_hooks_failure_and_its_on_error_decides() -> None:
    class Broken(FleetState):
        def _client(self, key: str) -> Any:
            raise OSError("connection refused")

    guarded = LIMIT.replace('name = "budget"', 'name = "budget"\non_error = "deny"')
    registry = _registry(Broken("redis://nowhere:1/0", "ns"), guarded)
    decision = registry.run(_bash("s1"), time_left_s=1.0)
    assert decision.outcome == "deny"
    assert "fleet state" in (decision.reason or "")


def test_the_python_api_counts_and_locks_for_the_running_request(state: FakeState) -> None:
    event = _bash("s1")
    with fleet.scope(state, event, 1.0):
        assert fleet.count("deploys", per="1h") == 1
        assert fleet.count("deploys", per="1h") == 1  # same request: counted once
        lock = fleet.lock("release-train", ttl="5m")
        assert lock.granted and lock.holder.session == "s1"
        got = fleet.get("release-train")
        assert got is not None and got.holder is not None
        assert fleet.release("release-train") is True
    with pytest.raises(FleetStateError, match="only available to hooks run by a hookbus worker"):
        fleet.count("deploys", per="1h")


def test_an_owned_session_never_lets_one_agent_pass_for_another() -> None:
    from hookbus.state.sessions import owned_session

    assert owned_session("alice", "s1") == "alice/s1"
    assert owned_session(None, "s1") == "/s1"
    assert owned_session("alice", None) is None
    # the agent's "/" is escaped: agent a/b's session c is not agent a's session b/c
    assert owned_session("a/b", "c") != owned_session("a", "b/c")
    assert owned_session("a%2Fb", "c") != owned_session("a/b", "c")


def test_a_session_id_with_a_newline_cannot_take_another_agents_lock(state: FakeState) -> None:
    taken = state.take_lock("lock:x", session="s1", agent="alice", ttl_ms=60_000, time_left_s=1)
    assert taken.granted
    forged = state.take_lock("lock:x", session="s1\nalice", agent="", ttl_ms=60_000, time_left_s=1)
    assert not forged.granted
    assert not state.release_lock("lock:x", session="s1\nalice", agent="", time_left_s=1)
    assert not state.release_lock("lock:x", session="s1", agent="bob", time_left_s=1)
    assert state.release_lock("lock:x", session="s1", agent="alice", time_left_s=1)


def test_state_ids_round_trip_through_their_redis_keys(state: FakeState) -> None:
    state.check_limit(limit_id("h", "a:b:c"), "r1", max_count=2, window_ms=60_000, time_left_s=1)
    state.take_lock(lock_id("deploy:prod"), session="s", agent="a", ttl_ms=60_000, time_left_s=1)
    from hookbus.bus import keys

    for state_id in ("limit:h:a:b:c", "lock:deploy:prod"):
        assert keys.state_id_of("ns", keys.state("ns", state_id)) == state_id
    assert state.reset(lock_id("deploy:prod")) is True
    assert state.get(lock_id("deploy:prod")) is None


def test_a_lock_on_a_hook_with_an_action_of_its_own_is_released_by_the_holders_release_event(
    state: FakeState,
) -> None:
    # the hook runs its action on PreToolUse and PostToolUse alike; the holder's PostToolUse
    # releases the lock and must not take it again
    with_action = LOCK.replace('events = ["PreToolUse"]', 'events = ["PreToolUse", "PostToolUse"]')
    with_action += '[action.prompt_inject]\ncontent = "deploys are serialised"\n'
    registry = _registry(state, with_action)
    assert registry.run(_bash("s1", environment="prod"), time_left_s=1.0).outcome == "allow"
    assert registry.run(_bash("s2", agent="a2", environment="prod"), time_left_s=1.0).outcome == (
        "deny"
    )
    payload = {"tool_name": "Bash", "tool_input": {"environment": "prod"}}
    post = Event(kind="PostToolUse", session_id="s1", agent_id="a1", payload=payload)
    registry.run(post, time_left_s=1.0, blocking=False)
    assert state.get(lock_id("deploy:prod")) is None
    assert registry.run(_bash("s2", agent="a2", environment="prod"), time_left_s=1.0).outcome == (
        "allow"
    )
