"""Lifecycle events for a Python agent runtime, one session at a time.

An agent loop wants to say "I am about to call this tool" and "here is what it returned",
not build :class:`Event` objects. :class:`AgentSession` (sync) and
:class:`AsyncAgentSession` (asyncio) carry the agent and session ids and turn each lifecycle
step into the right event: blocking kinds go through ``request`` and return the fleet's
:class:`Decision`, observe-only ones through ``publish``.

:meth:`AgentSession.guarded` wraps a tool function: it asks PreToolUse with the call's
keyword arguments as ``tool_input``, raises :class:`ToolDenied` on deny / ask / halt, calls
the function with any ``tool_input`` a hook rewrote, and publishes PostToolUse with the
result (or the error) and the duration. Both clients work, since the session only needs
their ``request`` and ``publish``.
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ParamSpec, Protocol, TypeVar

from hookbus.bus.wire import Caller, Decision, Event
from hookbus.errors import ToolDenied

P = ParamSpec("P")
R = TypeVar("R")

#: Longest tool response (characters of its ``repr``) put in a PostToolUse payload; the rest
#: is cut, so a tool returning megabytes does not turn every event into an oversize error.
MAX_RESPONSE_CHARS = 4096


class _SyncBus(Protocol):
    def request(self, event: Event, *, deadline_ms: int | None = None) -> Decision: ...

    def publish(self, event: Event) -> str: ...


class _AsyncBus(Protocol):
    async def request(self, event: Event, *, deadline_ms: int | None = None) -> Decision: ...

    async def publish(self, event: Event) -> str: ...


def _response(value: Any) -> Any:
    """A tool result as a payload field: JSON-like values as they are, others as text."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return value[:MAX_RESPONSE_CHARS]
    if isinstance(value, Mapping | list | tuple):
        text = repr(value)
        if len(text) <= MAX_RESPONSE_CHARS:
            return value
        return text[:MAX_RESPONSE_CHARS]
    return repr(value)[:MAX_RESPONSE_CHARS]


def _tool_input(decision: Decision, given: dict[str, Any]) -> dict[str, Any]:
    """The arguments to call the tool with: the caller's, with a hook's rewrite applied."""
    rewritten = decision.updated.get("tool_input")
    if isinstance(rewritten, Mapping):
        return {**given, **rewritten}
    return given


def _check(decision: Decision, tool: str) -> None:
    if decision.outcome != "allow":
        raise ToolDenied(tool, decision)


class _SessionBase:
    def __init__(
        self,
        agent_id: str,
        session_id: str | None = None,
        *,
        caller: Caller | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        self.agent_id = agent_id
        self.session_id = session_id or f"{agent_id}-{time.time_ns():x}"
        self.caller = caller or Caller()
        self.meta = dict(meta or {})

    def event(self, kind: str, payload: Mapping[str, Any]) -> Event:
        """An Event of this session (public so that callers can send kinds not wrapped here)."""
        return Event(
            kind=kind,
            session_id=self.session_id,
            agent_id=self.agent_id,
            payload=dict(payload),
            caller=self.caller,
            meta=dict(self.meta),
        )

    def _after(
        self, name: str, args: Mapping[str, Any], response: Any, duration_ms: int, error: str | None
    ) -> Event:
        payload: dict[str, Any] = {
            "tool_name": name,
            "tool_input": dict(args),
            "tool_response": _response(response),
            "duration_ms": duration_ms,
        }
        if error is not None:
            payload["error"] = error
        return self.event("PostToolUse", payload)


class AgentSession(_SessionBase):
    """One agent session on a synchronous :class:`~hookbus.HookBus`."""

    def __init__(self, bus: _SyncBus, agent_id: str, session_id: str | None = None, **kw: Any):
        super().__init__(agent_id, session_id, **kw)
        self.bus = bus

    def start(self, **payload: Any) -> str:
        return self.bus.publish(self.event("SessionStart", payload))

    def prompt(self, text: str, *, deadline_ms: int | None = None) -> Decision:
        """PromptSubmit: hooks may deny it, add context or rewrite the prompt."""
        return self.bus.request(
            self.event("PromptSubmit", {"prompt": text}), deadline_ms=deadline_ms
        )

    def before_tool(
        self, name: str, args: Mapping[str, Any], *, deadline_ms: int | None = None
    ) -> Decision:
        """PreToolUse: allow / deny / ask / halt, possibly with rewritten ``tool_input``."""
        event = self.event("PreToolUse", {"tool_name": name, "tool_input": dict(args)})
        return self.bus.request(event, deadline_ms=deadline_ms)

    def after_tool(
        self,
        name: str,
        args: Mapping[str, Any],
        response: Any = None,
        *,
        duration_ms: int = 0,
        error: str | None = None,
    ) -> str:
        """PostToolUse, published (fan-out): telemetry and audit hooks see it."""
        return self.bus.publish(self._after(name, args, response, duration_ms, error))

    def stop(self, reason: str | None = None) -> str:
        return self.bus.publish(self.event("Stop", {"reason": reason} if reason else {}))

    def end(self, reason: str | None = None) -> str:
        return self.bus.publish(self.event("SessionEnd", {"reason": reason} if reason else {}))

    def guarded(self, func: Callable[P, R] | None = None, *, tool: str | None = None) -> Any:
        """Decorate a tool function so that the fleet decides before every call.

        The tool's keyword arguments are its ``tool_input`` (positional arguments are
        refused: a guard must see names). Use as ``@session.guarded`` or
        ``@session.guarded(tool="Bash")``.
        """

        def wrap(fn: Callable[P, R]) -> Callable[P, R]:
            if inspect.iscoroutinefunction(fn):
                raise TypeError(f"{fn.__qualname__} is async: guard it with AsyncAgentSession")
            name = tool or fn.__name__

            @functools.wraps(fn)
            def call(*args: P.args, **kwargs: P.kwargs) -> R:
                if args:
                    raise TypeError(f"guarded tool {name} takes keyword arguments only")
                decision = self.before_tool(name, kwargs)
                _check(decision, name)
                final = _tool_input(decision, dict(kwargs))
                started = time.monotonic()
                try:
                    result = fn(**final)  # type: ignore[call-arg]
                except Exception as exc:
                    self.after_tool(name, final, None, duration_ms=_ms(started), error=repr(exc))
                    raise
                self.after_tool(name, final, result, duration_ms=_ms(started))
                return result

            return call

        return wrap(func) if func is not None else wrap


class AsyncAgentSession(_SessionBase):
    """One agent session on an :class:`~hookbus.AsyncHookBus`."""

    def __init__(
        self, bus: _AsyncBus, agent_id: str, session_id: str | None = None, **kw: Any
    ) -> None:
        super().__init__(agent_id, session_id, **kw)
        self.bus = bus

    async def start(self, **payload: Any) -> str:
        return await self.bus.publish(self.event("SessionStart", payload))

    async def prompt(self, text: str, *, deadline_ms: int | None = None) -> Decision:
        event = self.event("PromptSubmit", {"prompt": text})
        return await self.bus.request(event, deadline_ms=deadline_ms)

    async def before_tool(
        self, name: str, args: Mapping[str, Any], *, deadline_ms: int | None = None
    ) -> Decision:
        event = self.event("PreToolUse", {"tool_name": name, "tool_input": dict(args)})
        return await self.bus.request(event, deadline_ms=deadline_ms)

    async def after_tool(
        self,
        name: str,
        args: Mapping[str, Any],
        response: Any = None,
        *,
        duration_ms: int = 0,
        error: str | None = None,
    ) -> str:
        return await self.bus.publish(self._after(name, args, response, duration_ms, error))

    async def stop(self, reason: str | None = None) -> str:
        return await self.bus.publish(self.event("Stop", {"reason": reason} if reason else {}))

    async def end(self, reason: str | None = None) -> str:
        payload = {"reason": reason} if reason else {}
        return await self.bus.publish(self.event("SessionEnd", payload))

    def guarded(
        self, func: Callable[P, Awaitable[R]] | None = None, *, tool: str | None = None
    ) -> Any:
        """The async twin of :meth:`AgentSession.guarded`, for ``async def`` tools."""

        def wrap(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
            if not inspect.iscoroutinefunction(fn):
                raise TypeError(f"{fn.__qualname__} is not async: guard it with AgentSession")
            name = tool or fn.__name__

            @functools.wraps(fn)
            async def call(*args: P.args, **kwargs: P.kwargs) -> R:
                if args:
                    raise TypeError(f"guarded tool {name} takes keyword arguments only")
                decision = await self.before_tool(name, kwargs)
                _check(decision, name)
                final = _tool_input(decision, dict(kwargs))
                started = time.monotonic()
                try:
                    result = await fn(**final)  # type: ignore[call-arg]
                except Exception as exc:
                    await self.after_tool(
                        name, final, None, duration_ms=_ms(started), error=repr(exc)
                    )
                    raise
                await self.after_tool(name, final, result, duration_ms=_ms(started))
                return result

            return call

        return wrap(func) if func is not None else wrap


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
