"""Helpers shared by ``test_blocking_chain.py`` and the test modules that
need the same set-up (a test module never imports another)."""

from __future__ import annotations

from typing import Any

import fakeredis

from hookbus.bus import reqrep
from hookbus.bus.keys import Keys
from hookbus.bus.wire import Decision, Event, HookRun, encode, now_ms
from hookbus.workers.chain.worker import ChainWorker


class StubRegistry:
    """Just what the worker calls: run(), hooks(), version."""

    version = "v-stub"

    def __init__(self, *, fail: bool = False) -> None:
        self.fail = fail
        self.calls: list[tuple[str, float | None]] = []

    def hooks(self) -> list[Any]:
        return []

    def run(self, event: Event, *, time_left_s: float | None = None) -> Decision:
        self.calls.append((event.id, time_left_s))
        if self.fail:
            raise RuntimeError("registry bug")
        if event.payload.get("tool_name") == "Bash":
            return Decision(
                outcome="deny",
                reason="no shell",
                trace=[HookRun(hook_id="guard", outcome="deny")],
                bundle_version=self.version,
            )
        return Decision(outcome="allow", bundle_version=self.version)


def send_request(
    client: fakeredis.FakeRedis, keys: Keys, event: Event, *, inbox: str | None = None
) -> Event:
    sent = Event(
        kind=event.kind,
        id=event.id,
        payload=event.payload,
        deadline=event.deadline if event.deadline is not None else now_ms() + 5_000,
        reply_to=inbox or keys.reply(event.id),
    )
    client.xadd(keys.requests, {reqrep.REQUEST_FIELD: encode(sent)})
    return sent


def serve_all(worker: ChainWorker) -> None:
    """One read-and-answer pass; the answers normally ride with the next read."""
    worker.tick()
    worker.reader.flush_deferred()
