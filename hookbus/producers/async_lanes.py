"""One partition as the asyncio client sees it: request sender, reply inbox and its reader.

With ``partitions = 1`` on a single server the client has one lane (partition 0, today's
keys). With more, a request goes to the lane of its session's partition
(:func:`hookbus.bus.keys.partition_of`): its XADD to that partition's request stream and
its reply to this client's inbox *in the same hash slot* (``{ns:p}``), so the worker's reply
script touches one slot and, on a Redis Cluster, one master. Lanes other than 0 are made on
first use, each with connections of its own to the master serving its slot.
"""

from __future__ import annotations

import asyncio
from typing import Any

import redis.asyncio

from hookbus.bus import reqrep
from hookbus.bus.backlog_gate import BacklogGate
from hookbus.bus.keys import Keys
from hookbus.bus.wire import Decision
from hookbus.errors import WireError
from hookbus.producers.async_inbox import InboxReader
from hookbus.producers.async_outbox import RequestOutbox
from hookbus.producers.inbox_ttl import InboxTTL


class AsyncLane:
    """The outbox, inbox and inbox reader of one partition."""

    def __init__(
        self,
        keys: Keys,
        client: redis.asyncio.Redis,
        *,
        url: str,
        node_url: str,
        routing: dict[str, Any],
        producer_id: str,
        waiting: dict[bytes, asyncio.Future[Decision | WireError]],
        owns_client: bool,
        gate: BacklogGate,
    ) -> None:
        self.keys = keys
        self.client = client
        self.owns_client = owns_client
        self.inbox = keys.inbox(producer_id)
        self.inbox_ttl = InboxTTL(self.inbox)
        self.reader = InboxReader(
            node_url,
            self.inbox,
            waiting,
            routing=routing,
            name=f"hookbus-inbox-{producer_id}-{keys.partition}",
            inbox_ttl=self.inbox_ttl,
        )
        # XADD <requests> * e: every request's command up to its data (no MAXLEN: the chain
        # workers trim what they took; the gate refuses while the stream holds its limit)
        xadd_head = reqrep.request_xadd_head(keys.requests)
        self.gate = gate
        self.outbox = RequestOutbox(client, url, xadd_head, self.inbox_ttl, gate)
