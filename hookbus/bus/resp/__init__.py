"""The lean RESP2 client and the one RESP encoder.

:mod:`~hookbus.bus.resp.encode` packs commands (for this client and for every hand-packed
command of the workers and producers); :mod:`~hookbus.bus.resp.client` is one socket to one
server; :mod:`~hookbus.bus.resp.cluster` routes commands over a Redis Cluster's masters;
:mod:`~hookbus.bus.resp.address` parses URLs and masks their passwords. Standard library
only: the per-event agent-CLI hook runs on it.
"""

from __future__ import annotations

from hookbus.bus.resp.address import Address, is_cluster, mask_url
from hookbus.bus.resp.client import CONNECT_TIMEOUT_S, ReplyError, RespConnection, RespTimeout
from hookbus.bus.resp.encode import pack

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs ~2 ms per process
if TYPE_CHECKING:
    from hookbus.bus.resp.cluster import ClusterConnection

__all__ = [
    "Address",
    "ReplyError",
    "RespConnection",
    "RespTimeout",
    "connect",
    "is_cluster",
    "mask_url",
    "pack",
]


def connect(
    url: str, *, connect_timeout_s: float = CONNECT_TIMEOUT_S
) -> RespConnection | ClusterConnection:
    """A lean connection for ``url``: one socket, or routed over a cluster's masters."""
    if is_cluster(url):
        from hookbus.bus.resp.cluster import ClusterConnection

        return ClusterConnection(url, connect_timeout_s=connect_timeout_s)
    return RespConnection(url, connect_timeout_s=connect_timeout_s)
