"""The http client of agent-written hooks: it resolves each host itself and dials only an
address :func:`~hookbus.hooks.actions.egress.destination_problem` allows (see
:mod:`hookbus.hooks.actions.egress` for why), never follows redirects and ignores
environment proxies. Imported only when such a hook first sends.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

from hookbus.hooks.actions.egress import EgressPolicy, destination_problem


class GuardedBackend(httpcore.SyncBackend):
    """httpcore's socket backend, resolving and checking every address before it dials."""

    def __init__(self, policy: EgressPolicy) -> None:
        self.policy = policy

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from None
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        for address in addresses:
            problem = destination_problem(address, host, self.policy)
            if problem is not None:
                raise httpcore.ConnectError(f"refused: {problem}")
        return super().connect_tcp(
            addresses[0], port, timeout, local_address, socket_options=socket_options
        )


class GuardedTransport(httpx.HTTPTransport):
    """An httpx transport whose connection pool dials through :class:`GuardedBackend`."""

    def __init__(self, policy: EgressPolicy) -> None:
        super().__init__(trust_env=False)
        # HTTPTransport builds its pool without a backend argument; the pool is rebuilt with
        # the same defaults and the guarded backend (tests pin this down)
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            network_backend=GuardedBackend(policy),
        )


def guarded_client(policy: EgressPolicy) -> httpx.Client:
    """The http client of agent-written hooks: guarded dialling, no redirects, no proxies."""
    return httpx.Client(transport=GuardedTransport(policy), follow_redirects=False, trust_env=False)
