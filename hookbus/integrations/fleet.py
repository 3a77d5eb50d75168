"""Asking the fleet from inside an agent SDK's event loop, as the gateway does.

An SDK calls its hooks as coroutines on its own asyncio loop, so the fleet is asked through
the asyncio producer (:class:`~hookbus.producers.async_client.AsyncHookBus`) and never by a
blocking call: a slow fleet stalls only the call it guards, never the agent's other work. The
mapping, the deadlines, the failure policy, parked approvals and the rendering are the
gateway's (:class:`hookbus.harnesses.gateway.Gateway`), so an SDK hook answers exactly what
``hookbus <cli> hook`` and the gateway answer for the same input.

An SDK hook must never raise: the Claude Agent SDK lets a tool call run when its callback
raises. :meth:`Fleet.answer` therefore returns the adapter's fail-closed answer for every
failure (settings that do not load, Redis down, no worker, no answer in time, a bug), and
bounds its own wait, since the OpenAI Agents SDK has no guardrail timeout at all.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from hookbus.harnesses.adapters import REQUEST, Adapter, Answer, Output, Route
from hookbus.integrations.via_gateway import GatewayClient, GatewayUnanswered

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings
    from hookbus.harnesses.gateway import Gateway

log = logging.getLogger(__name__)

#: How long one hook waits for the fleet unless told otherwise, in seconds (Claude Code's
#: and the Claude Agent SDK's default hook timeout is 60 s; a guard answers far sooner).
DEFAULT_TIMEOUT_S = 30.0
#: Time kept back from an SDK's own hook timeout, so that the fleet's (or the fail-closed)
#: answer reaches the SDK before the SDK gives up on the hook, in seconds.
SDK_MARGIN_S = 0.5


class Fleet:
    """The fleet as an SDK's hooks see it: who the agent is, how long a hook may wait, and
    the gateway logic that asks (one per event loop: asyncio connections cannot cross
    loops, and a program may run its agent in several ``asyncio.run`` calls).

    ``settings`` default to the ones every entry point loads (``HOOKBUS_*``,
    ``hookbus.toml``), read on first use in a thread, so that neither making a Fleet nor
    its first hook blocks the loop. ``agent_id`` names the agent on every event.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        agent_id: str | None = None,
        session_id: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        gateway_url: str | None = None,
        token: str | None = None,
    ) -> None:
        if timeout_s <= SDK_MARGIN_S:
            raise ValueError(f"timeout_s must be over {SDK_MARGIN_S} s, not {timeout_s}")
        self.settings = settings
        self.agent_id = agent_id
        self.session_id = session_id or f"{agent_id or 'agent'}-{time.time_ns():x}"
        self.timeout_s = timeout_s
        self._gateway: Gateway | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.remote = GatewayClient(gateway_url, token) if gateway_url else None

    async def answer(self, harness: Adapter, data: dict[str, Any]) -> Output:
        """The adapter's output for one hook input (``hook_event_name`` and the event's
        fields, in the shape the adapter reads): the fleet's decision, or the fail-closed
        answer when there is none by ``timeout_s``. Never raises but for cancellation."""
        name = data.get("hook_event_name")
        if not isinstance(name, str) or not name:
            guard = Route("PreToolUse", mode=REQUEST, guard=True)
            return unavailable(harness, guard, "the hook input names no event")
        route = harness.route(name)
        arrival = time.monotonic()
        try:
            async with asyncio.timeout(self.timeout_s):
                if self.remote is not None:
                    return await self.remote.post(harness, data, self.timeout_s)
                gateway = await self._current()
                return await gateway.answer(
                    harness, route, data, self.agent_id, self.timeout_s, arrival
                )
        except TimeoutError:
            return unavailable(harness, route, f"no answer within {self.timeout_s:g} s")
        except GatewayUnanswered as exc:
            return unavailable(harness, route, str(exc))
        except Exception as exc:  # a hook must not raise: fail closed, saying why
            log.warning("hookbus: %s not answered: %r", name, exc)
            return unavailable(harness, route, f"the bus failed: {exc}")

    async def _current(self) -> Gateway:
        """The gateway logic of the running loop, made on first use in it (no await
        between the look and the making: hooks that start together share one)."""
        if self.settings is None:
            settings = await asyncio.to_thread(_load_settings)
            self.settings = self.settings or settings
        loop = asyncio.get_running_loop()
        if self._gateway is None or self._loop is not loop:
            from hookbus.harnesses.gateway import Gateway

            self._gateway, self._loop = Gateway(self.settings, None, None), loop
        return self._gateway

    async def aclose(self) -> None:
        """Close the connections of the running loop's client, if it made one: call it
        before the loop ends (``asyncio.run`` closes it), as a client of a closed loop
        cannot close its connections any more."""
        if self.remote is not None:
            await self.remote.aclose()
        gateway, self._gateway = self._gateway, None
        if gateway is not None and gateway.bus is not None:
            await gateway.bus.aclose()


def unavailable(harness: Adapter, route: Route, why: str) -> Output:
    """The adapter's answer when the fleet did not answer ``route``: a guard's deny (its
    reason says hookbus is unavailable and why), a pass with a note for anything else."""
    return harness.render(route, Answer(unavailable=why, policy="deny" if route.guard else None))


def _load_settings() -> Settings:
    from hookbus.bus.settings.loader import load_settings

    return load_settings().settings
