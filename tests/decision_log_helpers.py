"""Reading the decision log in tests: single records (the per-event hooks' reply path) and
batch records (the SDK's and the gateway's, settled in bulk) alike."""

from __future__ import annotations

import pytest
import redis

from hookbus.bus import keys
from hookbus.bus.decision_batch import logged
from hookbus.bus.wire import Decision, decode


def last_deny(client: redis.Redis, ns: str) -> str:
    """The reason of the newest deny among the last 50 logged decisions."""
    for record in reversed(logged(client, keys.decisions(ns))[-50:]):
        if b"d" in record:
            decision = decode(record[b"d"], Decision)
            outcome, reason = decision.outcome, decision.reason
        else:
            outcome, reason = (
                v.decode() if isinstance(v, bytes) else str(v)
                for v in (record.get(b"outcome", b""), record.get(b"reason", b""))
            )
        if outcome == "deny" and reason:
            return str(reason)
    pytest.fail("no deny in the decision log")
