"""The audit's rule for an http action's URL: scheme, cloud metadata, link-local and
private hosts, and the operator's ``security.http_allowlist``. Text only: the destination
an agent-written hook actually reaches is checked again at connect time
(:mod:`hookbus.hooks.actions.http`).
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from hookbus.audit.textscan import Sink
from hookbus.hooks.actions.egress import host_allowed

_METADATA_HOSTS = frozenset(
    {
        "metadata.google.internal",
        "metadata",
        "instance-data",
        "metadata.azure.com",
        "instance-data.ec2.internal",
    }
)
_METADATA_IPS = frozenset({"169.254.169.254", "fd00:ec2::254", "100.100.100.200", "169.254.170.2"})


def scan_url(
    url: str, sink: Sink, *, allowlist: tuple[str, ...], allow_private: bool, line: int | None
) -> None:
    """An http action's URL: scheme, metadata / link-local / private hosts, the allowlist."""
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname or ""
    except ValueError:
        sink(
            "http-scheme",
            "high",
            line,
            f"the URL {url!r} does not parse: write a plain https:// URL",
        )
        return
    scheme = parts.scheme.lower()
    if "${" in url and not host:
        return  # the whole URL comes from an allow-listed environment variable
    if scheme not in {"http", "https"}:
        sink(
            "http-scheme",
            "critical",
            line,
            f"the URL {url!r} uses the {scheme or 'missing'} scheme: only http:// and https:// are "
            "allowed (file:// would read local files)",
        )
        return
    if not host:
        sink("http-scheme", "high", line, f"the URL {url!r} has no host: write a full https:// URL")
        return
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        ip = None
    if ip is not None and getattr(ip, "ipv4_mapped", None) is not None:
        ip = ip.ipv4_mapped  # type: ignore[union-attr]
    lowered = host.lower().rstrip(".")
    if lowered in _METADATA_HOSTS or (
        ip is not None and (str(ip) in _METADATA_IPS or ip.is_link_local)
    ):
        sink(
            "http-metadata",
            "critical",
            line,
            f"the URL {url!r} targets a cloud metadata or link-local address: a hook must never "
            "reach instance credentials; remove it",
        )
        return
    private = (
        lowered in {"localhost", "localhost.localdomain"}
        or lowered.endswith(".localhost")
        or (
            ip is not None
            and (ip.is_loopback or ip.is_private or ip.is_unspecified or ip.is_reserved)
        )
    )
    if private and not allow_private:
        sink(
            "http-private",
            "high",
            line,
            f"the URL {url!r} targets a loopback or private address: set "
            "security.allow_private_http = true if this local service is intended",
        )
    if allowlist and not host_allowed(lowered, allowlist):
        sink(
            "http-not-allowlisted",
            "high",
            line,
            f"the host {host!r} is not in security.http_allowlist ({', '.join(allowlist)}): "
            "use an allowed host or ask an operator to add it",
        )
