"""AgentSession / AsyncAgentSession: lifecycle events for a Python agent runtime."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from hookbus.bus.wire import Decision, Event
from hookbus.errors import ToolDenied
from hookbus.producers.agent_session import AgentSession, AsyncAgentSession


class RecordingBus:
    """Answers every request with the next canned decision and records what was sent."""

    def __init__(self, *decisions: Decision) -> None:
        self.decisions = list(decisions)
        self.requested: list[Event] = []
        self.published: list[Event] = []

    def request(self, event: Event, *, deadline_ms: int | None = None) -> Decision:
        self.requested.append(event)
        return self.decisions.pop(0) if self.decisions else Decision()

    def publish(self, event: Event) -> str:
        self.published.append(event)
        return event.id


class AsyncRecordingBus(RecordingBus):
    async def request(self, event: Event, *, deadline_ms: int | None = None) -> Decision:  # type: ignore[override]
        return RecordingBus.request(self, event, deadline_ms=deadline_ms)

    async def publish(self, event: Event) -> str:  # type: ignore[override]
        return RecordingBus.publish(self, event)


def test_before_tool_asks_pre_tool_use_with_the_session_s_ids() -> None:
    bus = RecordingBus(Decision(outcome="deny", reason="no"))
    session = AgentSession(bus, "agent-7", "sess-1")

    decision = session.before_tool("Bash", {"command": "rm -rf /"})

    assert decision.outcome == "deny"
    (sent,) = bus.requested
    assert (sent.kind, sent.agent_id, sent.session_id) == ("PreToolUse", "agent-7", "sess-1")
    assert sent.payload == {"tool_name": "Bash", "tool_input": {"command": "rm -rf /"}}


def test_prompt_is_a_blocking_prompt_submit_and_lifecycle_ends_are_published() -> None:
    bus = RecordingBus()
    session = AgentSession(bus, "a", "s")

    session.prompt("deploy the thing")
    session.start(model="m")
    session.stop("done")
    session.end()

    assert [e.kind for e in bus.requested] == ["PromptSubmit"]
    assert bus.requested[0].payload == {"prompt": "deploy the thing"}
    assert [e.kind for e in bus.published] == ["SessionStart", "Stop", "SessionEnd"]


def test_a_guarded_tool_runs_when_allowed_and_its_result_is_published() -> None:
    bus = RecordingBus(Decision(outcome="allow"))
    session = AgentSession(bus, "a", "s")

    @session.guarded
    def read_file(path: str) -> str:
        return f"contents of {path}"

    assert read_file(path="README.md") == "contents of README.md"
    (post,) = bus.published
    assert post.kind == "PostToolUse"
    assert post.payload["tool_name"] == "read_file"
    assert post.payload["tool_input"] == {"path": "README.md"}
    assert post.payload["tool_response"] == "contents of README.md"


def test_a_denied_tool_never_runs_and_raises_tool_denied_with_the_reason() -> None:
    bus = RecordingBus(Decision(outcome="deny", reason="destructive command"))
    session = AgentSession(bus, "a", "s")
    ran: list[str] = []

    @session.guarded(tool="Bash")
    def shell(command: str) -> None:
        ran.append(command)

    with pytest.raises(ToolDenied, match="destructive command") as caught:
        shell(command="rm -rf /")

    assert ran == []
    assert caught.value.decision.outcome == "deny"
    assert bus.published == []


@pytest.mark.parametrize("outcome", ["ask", "halt"])
def test_ask_and_halt_also_keep_the_tool_from_running(outcome: Any) -> None:
    session = AgentSession(RecordingBus(Decision(outcome=outcome)), "a", "s")

    @session.guarded
    def tool() -> str:
        raise AssertionError("must not run")

    with pytest.raises(ToolDenied):
        tool()


def test_a_hook_s_rewrite_of_tool_input_is_what_the_tool_is_called_with() -> None:
    rewrite = Decision(outcome="allow", updated={"tool_input": {"command": "ls -la"}})
    bus = RecordingBus(rewrite)
    session = AgentSession(bus, "a", "s")

    @session.guarded(tool="Bash")
    def shell(command: str, cwd: str = ".") -> str:
        return f"{command} in {cwd}"

    assert shell(command="ls", cwd="/tmp") == "ls -la in /tmp"
    assert bus.published[0].payload["tool_input"] == {"command": "ls -la", "cwd": "/tmp"}


def test_a_tool_that_raises_still_reports_post_tool_use_with_the_error() -> None:
    bus = RecordingBus(Decision())
    session = AgentSession(bus, "a", "s")

    @session.guarded
    def broken() -> None:
        raise ValueError("disk full")

    with pytest.raises(ValueError, match="disk full"):
        broken()
    assert "disk full" in bus.published[0].payload["error"]


def test_positional_arguments_are_refused_so_guards_always_see_names() -> None:
    session = AgentSession(RecordingBus(), "a", "s")

    @session.guarded
    def tool(x: int) -> int:
        return x

    with pytest.raises(TypeError, match="keyword arguments only"):
        tool(1)


def test_a_huge_tool_response_is_cut_before_it_is_published() -> None:
    bus = RecordingBus(Decision())
    session = AgentSession(bus, "a", "s")

    @session.guarded
    def dump() -> str:
        return "x" * 1_000_000

    dump()
    assert len(bus.published[0].payload["tool_response"]) == 4096


def test_the_async_session_guards_async_tools_the_same_way() -> None:
    bus = AsyncRecordingBus(Decision(outcome="allow"), Decision(outcome="deny", reason="nope"))
    session = AsyncAgentSession(bus, "a", "s")

    @session.guarded(tool="Fetch")
    async def fetch(url: str) -> str:
        return f"got {url}"

    async def main() -> None:
        assert await fetch(url="https://example.org") == "got https://example.org"
        with pytest.raises(ToolDenied, match="nope"):
            await fetch(url="http://169.254.169.254/")

    asyncio.run(main())
    assert [e.kind for e in bus.requested] == ["PreToolUse", "PreToolUse"]
    assert [e.kind for e in bus.published] == ["PostToolUse"]


def test_guarding_with_the_wrong_flavour_is_a_clear_error() -> None:
    async def async_tool() -> None:
        return None

    def sync_tool() -> None:
        return None

    with pytest.raises(TypeError, match="AsyncAgentSession"):
        AgentSession(RecordingBus(), "a").guarded(async_tool)
    with pytest.raises(TypeError, match="AgentSession"):
        AsyncAgentSession(AsyncRecordingBus(), "a").guarded(sync_tool)


def test_the_clients_open_sessions_and_publish_returns_the_event_id() -> None:
    import fakeredis

    from hookbus import HookBus
    from hookbus.bus.settings.loader import Settings

    bus = HookBus(Settings(namespace="sess"), client=fakeredis.FakeRedis(protocol=2))
    session = bus.session("agent-1", "s-1")
    event_id = session.end()

    assert isinstance(session, AgentSession)
    (entry,) = bus.client.xrange("hookbus:{sess}:events")
    from hookbus.bus.wire import decode

    sent = decode(entry[1][b"e"], Event)
    assert (sent.id, sent.kind, sent.agent_id) == (event_id, "SessionEnd", "agent-1")
