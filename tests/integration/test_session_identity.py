"""A session belongs to the agent that opened it: through the gateway, with two agents'
tokens and a real fleet (chain, fan-out and RQ workers), an agent that resends another
agent's ``session_id`` acts only on a session of its own. It is refused the other's lock and
cannot release it, its refusals never escalate the other's session, it spends no
``{session}``-keyed budget of the other's, and a notice meant for the other's session, or
already delivered to its own session of that id, is never taken from the owner."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from rq.registry import FailedJobRegistry, FinishedJobRegistry

from hookbus.bus.keys import rq_queue_name
from hookbus.bus.settings.loader import Settings
from hookbus.harnesses.gateway import create_app
from hookbus.harnesses.gateway_http import TokenTable
from hookbus.state.admin import send_notice, show_state
from hookbus.state.store import lock_id
from tests.gateway_helpers import fixture, post, serving
from tests.state_helpers import Fleet, fleet, write_hook

ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef"
#: The session id alice opened; bob learns it (from a refusal, a log, a guess) and resends it.
SESSION = "3f1c2e0a-5b7d-4c1e-9a2b-0d6f8e4c1a77"

LOCK = """
events = ["PreToolUse"]
on_error = "deny"
[match]
tools = ["Bash"]
[lock]
key = "deploy:{payload.tool_input.environment}"
ttl = "15m"
release_on = ["PostToolUse"]
"""

BUDGET = """
events = ["PreToolUse"]
on_error = "deny"
[limit]
key = "{session}"
max = 2
per = "1h"
"""

NO_RM = """
events = ["PreToolUse"]
[match.tool_input]
command = "rm*"
[limit]
key = "{agent}:rm"
max = 1
per = "1h"
"""

STRIKES = """
events = ["PreToolUse"]
[escalate]
after = 3
within = "10m"
of = "deny"
per = "session"
then = "halt"
"""


@pytest.fixture
def gateway_port(real_redis_url: str, namespace: str, tmp_path: Path) -> Iterator[int]:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {ALICE}\nbob {BOB}\n")
    tokens.chmod(0o600)
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    app = create_app(settings, tokens=TokenTable.from_file(tokens))
    with serving(app) as port:
        yield port


def _as(token: str, port: int, kind: str, **fields: Any) -> dict[str, Any]:
    status, body = post(
        port,
        fixture(kind, session_id=SESSION, **fields),
        headers=f"Authorization: Bearer {token}\r\n",
    )
    assert status == 200, body
    return body or {}


def _bash(token: str, port: int, command: str = "ls", **tool_input: Any) -> dict[str, Any]:
    return _as(token, port, "PreToolUse", tool_input={"command": command, **tool_input})


def _verdict(out: dict[str, Any]) -> str:
    """allow, deny or halt, as Claude Code reads the answer."""
    if out.get("continue") is False:
        return "halt"
    decision = (out.get("hookSpecificOutput") or {}).get("permissionDecision")
    return "deny" if decision == "deny" else "allow"


def _reason(out: dict[str, Any]) -> str:
    return str((out.get("hookSpecificOutput") or {}).get("permissionDecisionReason") or "")


def _jobs_done(client: redis.Redis, namespace: str) -> int:
    name = rq_queue_name(namespace)
    return (
        FinishedJobRegistry(name, connection=client).count
        + FailedJobRegistry(name, connection=client).count
    )


def _wait_jobs(client: redis.Redis, namespace: str, n: int, timeout_s: float = 30.0) -> None:
    end = time.monotonic() + timeout_s
    while _jobs_done(client, namespace) < n:
        assert time.monotonic() < end, f"the RQ workers did not finish {n} jobs"
        time.sleep(0.05)


def _start(workers: Fleet) -> None:
    workers.start("chain", "--concurrency", "4")
    workers.start("fanout")
    workers.start("rq")
    workers.wait_chain_workers(1)


def test_another_agent_resending_the_holders_session_is_refused_the_lock_and_cannot_release_it(
    real_redis_url: str,
    real_redis: redis.Redis,
    namespace: str,
    tmp_path: Path,
    gateway_port: int,
) -> None:
    write_hook(tmp_path / "hooks", "deploy-lock", LOCK)
    with fleet(real_redis_url, namespace, tmp_path / "hooks") as workers:
        _start(workers)
        assert _verdict(_bash(ALICE, gateway_port, environment="production")) == "allow"
        bob = _bash(BOB, gateway_port, environment="production")
        assert _verdict(bob) == "deny"
        # the refusal names the holder agent and when, never a session id to reuse
        assert "held by agent 'alice' since " in _reason(bob)
        assert SESSION not in json.dumps(bob)
        # bob's PostToolUse under alice's session id leaves alice's lock where it is
        _as(BOB, gateway_port, "PostToolUse", tool_input={"environment": "production"})
        _wait_jobs(real_redis, namespace, 1)
        held = show_state(workers.settings(), lock_id("deploy:production"))
        assert held is not None and held.holder is not None
        assert (held.holder.agent, held.holder.session) == ("alice", SESSION)
        assert _verdict(_bash(BOB, gateway_port, environment="production")) == "deny"
        # alice's own PostToolUse does release it
        _as(ALICE, gateway_port, "PostToolUse", tool_input={"environment": "production"})
        _wait_jobs(real_redis, namespace, 2)
        assert show_state(workers.settings(), lock_id("deploy:production")) is None
        assert _verdict(_bash(BOB, gateway_port, environment="production")) == "allow"


def test_refusals_filed_under_another_agents_session_never_escalate_its_owner(
    real_redis_url: str,
    real_redis: redis.Redis,
    namespace: str,
    tmp_path: Path,
    gateway_port: int,
) -> None:
    write_hook(tmp_path / "hooks", "no-rm", NO_RM)
    write_hook(tmp_path / "hooks", "three-strikes", STRIKES)
    with fleet(real_redis_url, namespace, tmp_path / "hooks") as workers:
        _start(workers)
        # each agent's first rm is within its budget, the next ones are refused
        bobs = [_verdict(_bash(BOB, gateway_port, "rm -rf x")) for _ in range(3)]
        assert bobs == ["allow", "deny", "deny"]
        # bob's two refusals under alice's session id are his own: alice's first is a deny
        alices = [_verdict(_bash(ALICE, gateway_port, "rm -rf x")) for _ in range(4)]
        assert alices == ["allow", "deny", "deny", "halt"]


def test_a_session_keyed_limit_is_never_spent_by_another_agent(
    real_redis_url: str,
    real_redis: redis.Redis,
    namespace: str,
    tmp_path: Path,
    gateway_port: int,
) -> None:
    write_hook(tmp_path / "hooks", "session-budget", BUDGET)
    with fleet(real_redis_url, namespace, tmp_path / "hooks") as workers:
        _start(workers)
        assert [_verdict(_bash(BOB, gateway_port)) for _ in range(3)] == ["allow", "allow", "deny"]
        assert [_verdict(_bash(ALICE, gateway_port)) for _ in range(3)] == [
            "allow",
            "allow",
            "deny",
        ]


def _context(out: dict[str, Any]) -> str:
    return str((out.get("hookSpecificOutput") or {}).get("additionalContext") or "")


def test_a_notice_for_a_session_reaches_its_owner_and_never_the_agent_that_claims_it_first(
    real_redis_url: str,
    real_redis: redis.Redis,
    namespace: str,
    tmp_path: Path,
    gateway_port: int,
) -> None:
    (tmp_path / "hooks").mkdir()
    with fleet(real_redis_url, namespace, tmp_path / "hooks") as workers:
        _start(workers)
        settings = workers.settings()
        # a session id alone names no session: every agent may open one by that id
        with pytest.raises(ValueError, match="--agent"):
            send_notice(
                settings, "stop deploying", severity="info", ttl_ms=600_000, session=SESSION
            )
        send_notice(
            settings,
            "alice: stop deploying",
            severity="info",
            ttl_ms=600_000,
            agent="alice",
            session=SESSION,
        )
        send_notice(settings, "main is frozen", severity="info", ttl_ms=600_000)
        time.sleep(1.2)  # a worker reloads the notices at most once a second
        bob = [_context(_bash(BOB, gateway_port)) for _ in range(2)]
        alice = [_context(_bash(ALICE, gateway_port)) for _ in range(2)]
    # bob claimed the session id first: he gets the fleet-wide notice once, not alice's
    assert "main is frozen" in bob[0] and "alice: stop deploying" not in bob[0]
    assert bob[1] == ""
    # alice still gets both, once
    assert "main is frozen" in alice[0] and "alice: stop deploying" in alice[0]
    assert alice[1] == ""
