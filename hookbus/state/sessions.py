"""Whose session an event is: a session belongs to the agent that opened it.

A session id is whatever the event's body says, and another agent may send the same id (it
read it in a log, a refusal, or guessed it). So fleet state never keys on the session id
alone: a lock's holder, a release, an escalation counter per session, a ``{session}`` key,
a notice's delivery are all per (agent, session), written ``AGENT/SESSION``. The agent id
is the one the event carries: the gateway's token's, or what an SDK producer claims
(docs/security.md says which path carries which). An agent resending another's session id
therefore acts on a session of its own of that id, never on the other's.
"""

from __future__ import annotations

from typing import Any


def _printable(text: str) -> str:
    # state values are parsed back from Redis and shown to operators: no control characters
    return "".join(c if c.isprintable() else "?" for c in text)


def agent_part(agent: str | None) -> str:
    """``agent`` as the first part of an owned session: ``%`` and ``/`` escaped, so the
    first ``/`` of ``AGENT/SESSION`` always ends the agent (agent ``a/b`` with session
    ``c`` and agent ``a`` with session ``b/c`` never meet)."""
    text = _printable(agent or "")
    return text.replace("%", "%25").replace("/", "%2F")


def owned_session(agent: str | None, session: str | None) -> str | None:
    """``AGENT/SESSION`` (``/SESSION`` for an event with no agent id); None without a
    session."""
    if not session:
        return None
    return f"{agent_part(agent)}/{_printable(session)}"


def event_session(event: Any) -> str | None:
    """The owned session of ``event`` (an :class:`~hookbus.bus.wire.Event`)."""
    return owned_session(getattr(event, "agent_id", None), getattr(event, "session_id", None))


def lock_owner(agent: str | None, session: str) -> tuple[str, str]:
    """(session, agent) as a lock's value holds them: printable, so the value's newlines
    only ever separate its fields and no session id can pass for another agent's."""
    return _printable(session), _printable(agent or "")
