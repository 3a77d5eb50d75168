"""Asking the fleet through ``hookbus gateway``, for an agent program that holds a gateway
token and no Redis user (docs/security.md: an agent gets a token, never a Redis user).

The gateway's ``POST /v1/hooks/<cli>`` takes exactly the hook input an agent CLI sends and
answers that CLI's hook JSON, always with HTTP 200 where it could answer for the input. So
this is one POST per hook, on an ``httpx.AsyncClient`` of the running loop; anything else
(the gateway down, a refused token, a status other than 200, a body that is not JSON, no
answer in time) is the adapter's fail-closed answer, never an exception.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from hookbus.harnesses.adapters import ADAPTER_MODULES, Adapter, Output

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)

#: The hook path of a CLI on the gateway (the gateway's ``HOOKS_PREFIX``).
HOOKS_PATH = "/v1/hooks/"


class GatewayClient:
    """One gateway, as the hooks of one program ask it: its URL, the agent's token."""

    def __init__(self, url: str, token: str | None = None) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def serves(self, harness: Adapter) -> bool:
        """Whether the gateway has a hook path for ``harness`` (the agent CLIs' rows)."""
        return harness.name in ADAPTER_MODULES

    async def post(self, harness: Adapter, data: dict[str, Any], timeout_s: float) -> Output:
        """The gateway's answer to one hook input; raises :class:`GatewayUnanswered`
        saying why when there is none."""
        import httpx

        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            response = await self._current().post(
                f"{self.url}{HOOKS_PATH}{harness.name}",
                params={"timeout": f"{timeout_s:g}"},
                json=data,
                headers=headers,
                timeout=timeout_s,
            )
        except httpx.HTTPError as exc:
            raise GatewayUnanswered(f"the gateway at {self.url} did not answer: {exc!r}") from exc
        if response.status_code == 401:
            raise GatewayUnanswered(f"the gateway at {self.url} refused this agent's token")
        if response.status_code != 200:
            raise GatewayUnanswered(
                f"the gateway at {self.url} answered HTTP {response.status_code}"
            )
        try:
            body = response.json()
        except ValueError as exc:
            raise GatewayUnanswered(f"the gateway at {self.url} answered no JSON") from exc
        if not isinstance(body, dict):
            raise GatewayUnanswered(f"the gateway at {self.url} answered no JSON object")
        return Output(body or None)

    def _current(self) -> httpx.AsyncClient:
        """The HTTP client of the running loop (its connections cannot cross loops)."""
        import httpx

        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client, self._loop = httpx.AsyncClient(), loop
        return self._client

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


class GatewayUnanswered(Exception):
    """The gateway gave no answer the hook can use; ``args[0]`` says why."""
