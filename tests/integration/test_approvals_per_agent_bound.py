"""One agent cannot bury every other agent's asks: the approval inbox holds at most
``approvals.max_pending_per_agent`` (10) of one agent's requests; its next ask is answered at
once by the kind's policy, flagged degraded, with the reason, while another agent's ask is
parked as usual, and a decision frees its agent a place. A real chain worker process."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from hookbus import HookBus
from hookbus.approvals.inbox import ApprovalInbox
from hookbus.bus.wire import Decision, Event
from tests.approval_helpers import (
    ask_payload,
    parked,
    settings_for,
    start_worker,
    stop_worker,
    wait_alive,
    wait_for,
)

#: The default bound on one agent's pending approvals.
BOUND = 10


@pytest.fixture
def fleet(real_redis_url: str, real_redis: redis.Redis, namespace: str) -> Iterator[str]:
    proc = start_worker(real_redis_url, namespace, wait_s=60)
    try:
        wait_alive(real_redis, namespace, proc)
        yield namespace
    finally:
        stop_worker(proc)


class Agents:
    """Agents asking on threads of their own; each answer lands in ``answers``."""

    def __init__(self, url: str, ns: str) -> None:
        self.url, self.ns = url, ns
        self.answers: list[tuple[str, Decision]] = []
        self.threads: list[threading.Thread] = []

    def ask(self, agent: str, command: str) -> None:
        def run() -> None:
            bus = HookBus.from_url(self.url, self.ns)
            try:
                event = Event(kind="PreToolUse", payload=ask_payload(command), agent_id=agent)
                self.answers.append((agent, bus.request(event, deadline_ms=5000)))
            finally:
                bus.close()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        self.threads.append(thread)


def test_one_agent_past_its_bound_is_answered_by_policy_and_another_is_parked(
    real_redis_url: str, fleet: str
) -> None:
    inbox = ApprovalInbox(settings_for(real_redis_url, fleet))
    agents = Agents(real_redis_url, fleet)
    for n in range(BOUND):
        agents.ask("noisy", f"terraform destroy {n}")
    parked(inbox, BOUND)
    for n in range(5):
        agents.ask("noisy", f"terraform destroy extra {n}")
    wait_for(lambda: len(agents.answers) == 5, 15, "the asks past the bound answered")
    agents.ask("quiet", "kubectl delete ns staging")
    items = parked(inbox, BOUND + 1)

    refused: list[Any] = [d for agent, d in agents.answers if agent == "noisy"]
    assert [(d.outcome, d.degraded) for d in refused] == [("deny", True)] * 5
    assert "agent noisy already has 10 approvals waiting for an operator" in (
        refused[0].reason or ""
    )
    quiet = [i for i in items if i.agent == "quiet"]
    assert len(quiet) == 1, "the other agent's ask was not put before an operator"

    # a decision gives the agent its place back
    noisy_item = next(i for i in items if i.agent == "noisy")
    inbox.decide(noisy_item.id, "deny", who="operator:ann", note="no")
    agents.ask("noisy", "terraform destroy once more")
    wait_for(
        lambda: any(i.input.endswith("once more") for i in inbox.pending()),
        15,
        "the noisy agent's next ask parked after a decision",
    )
    for item in inbox.pending():
        inbox.decide(item.id, "deny", who="operator:ann", note="done")
    for thread in agents.threads:
        thread.join(15)
