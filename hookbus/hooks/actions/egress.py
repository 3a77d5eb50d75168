"""Where an agent-written http hook may connect: checked on the address actually dialled.

A URL's text says little: ``http://2130706433/``, ``http://0x7f000001/``, ``http://127.1/``
and a name whose DNS answer is ``10.0.0.5`` all reach the inside. So the http client of
agent-written hooks resolves the host itself, at connect time, refuses when *any* address
it resolves to is not globally routable (loopback, private, link-local, cloud metadata,
shared, reserved, multicast; IPv4-mapped, 6to4 and Teredo IPv6 forms unwrapped), and then
dials the address it checked, so a DNS answer cannot change in between. Redirects are never
followed (a 3xx is the hook's error), and every connection, a redirect's included, would pass
through the same check. Environment proxies are ignored for the same reason.

An operator may allow named hosts (``security.http_allowlist``) to be private: an internal
service. Cloud metadata addresses stay refused even then.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from hookbus.bus.settings.schema import Settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: Cloud metadata services: never reachable from a hook, allowlisted or not.
METADATA_IPS = frozenset(
    {"169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200", "192.0.0.192"}
)


@dataclass(frozen=True)
class EgressPolicy:
    """The operator's word on agent-written http hooks (from ``security.*``).

    ``allow_hosts``: host names (``api.internal``, ``*.corp.example``) that may resolve to
    private addresses. ``header_env``: the environment variables whose values headers may
    carry (``${NAME}``); nothing else of the worker's environment can be sent."""

    allow_hosts: tuple[str, ...] = ()
    header_env: tuple[str, ...] = ()

    @classmethod
    def from_settings(cls, settings: Settings) -> EgressPolicy:
        security = settings.security
        return cls(
            allow_hosts=tuple(security.http_allowlist),
            header_env=tuple(getattr(security, "http_header_env", ())),
        )


def host_allowed(host: str, allowlist: Iterable[str]) -> bool:
    """Is ``host`` one of ``allowlist`` (exact names, ``*.suffix`` patterns, or URLs)?"""
    host = host.lower().rstrip(".")
    for entry in allowlist:
        e = entry.lower().strip()
        if "://" in e:
            e = urlsplit(e).hostname or ""
        e = e.split(":")[0] if e.count(":") == 1 else e
        if e.startswith("*."):
            if host.endswith(e[1:]) or host == e[2:]:
                return True
        elif host == e:
            return True
    return False


def unwrap(ip: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 address carries (mapped, 6to4, Teredo), else ``ip``."""
    if isinstance(ip, ipaddress.IPv6Address):
        inner = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if inner is not None:
            return inner
    return ip


def destination_problem(address: str, host: str, policy: EgressPolicy) -> str | None:
    """Why a hook may not connect to ``address`` (resolved from ``host``), or ``None``."""
    try:
        ip = unwrap(ipaddress.ip_address(address.split("%", 1)[0]))
    except ValueError:
        return f"{address!r} is not an IP address"
    if str(ip) in METADATA_IPS:
        return f"{host} resolves to {ip}, a cloud metadata address"
    if ip.is_global and not ip.is_multicast:
        return None
    if host_allowed(host, policy.allow_hosts):
        return None
    kind = (
        "loopback"
        if ip.is_loopback
        else "link-local"
        if ip.is_link_local
        else "private"
        if ip.is_private
        else "not globally routable"
    )
    return (
        f"{host} resolves to {ip}, which is {kind}: an agent-written hook may reach only public "
        "addresses (an operator may list the host in security.http_allowlist)"
    )
