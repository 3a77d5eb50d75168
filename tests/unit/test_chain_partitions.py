"""Chain worker options of issue 16: the decision log's scope and partitioned streams."""

from __future__ import annotations

import fakeredis
import msgspec

from hookbus.bus import reqrep
from hookbus.bus.keys import Keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Decision, Event, decode
from hookbus.workers.chain.worker import ChainWorker
from tests.chain_helpers import StubRegistry, send_request, serve_all


def _worker(client: fakeredis.FakeRedis, settings: Settings, partition: int = 0) -> ChainWorker:
    worker = ChainWorker(
        settings,
        StubRegistry(),  # type: ignore[arg-type]
        client=client,
        worker_id="w1",
        partition=partition,
    )
    worker.ensure_group()
    worker.clock.refresh(client)
    return worker


def _with_log(scope: str) -> Settings:
    base = Settings(namespace="logscope")
    return msgspec.structs.replace(
        base, streams=msgspec.structs.replace(base.streams, decision_log=scope)
    )


def test_not_allow_logs_the_deny_and_leaves_the_plain_allow_out(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    worker = _worker(fake_redis, _with_log("not_allow"))
    allowed = send_request(
        fake_redis, worker.keys, Event(kind="PreToolUse", payload={"tool_name": "Read"})
    )
    denied = send_request(
        fake_redis, worker.keys, Event(kind="PreToolUse", payload={"tool_name": "Bash"})
    )
    serve_all(worker)
    assert fake_redis.llen(worker.keys.reply(allowed.id)) == 1  # answered all the same
    assert fake_redis.llen(worker.keys.reply(denied.id)) == 1
    logged = fake_redis.xrange(worker.keys.decisions)
    assert [fields[b"outcome"] for _, fields in logged] == [b"deny"]
    assert fake_redis.xpending(worker.keys.requests, "chain")["pending"] == 0


def test_off_logs_nothing_and_still_answers_once(fake_redis: fakeredis.FakeRedis) -> None:
    worker = _worker(fake_redis, _with_log("off"))
    denied = send_request(
        fake_redis, worker.keys, Event(kind="PreToolUse", payload={"tool_name": "Bash"})
    )
    serve_all(worker)
    assert fake_redis.llen(worker.keys.reply(denied.id)) == 1
    assert fake_redis.exists(worker.keys.decisions) == 0
    assert worker.answered == 1


def test_a_partition_s_worker_serves_its_own_stream_and_heartbeats_in_the_namespace(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    settings = Settings(namespace="parts", partitions=3)
    worker = _worker(fake_redis, settings, partition=2)
    part = Keys.for_partition("parts", 2)
    assert worker.keys == part
    inbox = part.inbox("producer-1")
    fake_redis.xadd(inbox, {"k": "1"}, maxlen=0)  # the producer's inbox, in the same slot
    sent = send_request(fake_redis, part, Event(kind="PreToolUse"), inbox=inbox)
    serve_all(worker)
    ((_, fields),) = fake_redis.xrange(inbox)
    assert decode(fields[reqrep.INBOX_DECISION_FIELD], Decision).outcome == "allow"
    assert fields[reqrep.INBOX_ID_FIELD] == sent.id.encode()
    assert fake_redis.xlen(part.decisions) == 1
    assert fake_redis.exists(Keys.for_namespace("parts").requests) == 0  # partition 0 untouched
    worker.heartbeat.beat_now()
    assert fake_redis.hexists(Keys.for_namespace("parts").workers, "w1")


def test_the_answers_of_one_flush_share_one_script_call_and_each_is_acked_on_its_own(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    worker = _worker(fake_redis, Settings(namespace="batch"))
    keys = worker.keys
    sent = [send_request(fake_redis, keys, Event(kind="PreToolUse")) for _ in range(3)]
    read = fake_redis.xreadgroup("chain", "w1", {keys.requests: ">"}, count=10)
    entry_ids = [entry_id for entry_id, _ in read[0][1]]
    fake_redis.xack(keys.requests, "chain", entry_ids[1])  # answered by another delivery
    ops = [
        worker.replier.reply_op(entry_id, event, Decision(outcome="allow"), 1.0)
        for entry_id, event in zip(entry_ids, sent, strict=True)
    ]
    batch = worker.replier.commands(ops)
    assert len(batch.commands) == 1 and batch.reply_slots == [0] and batch.ledger == []
    worker.replier.flush(ops)
    assert [fake_redis.llen(keys.reply(event.id)) for event in sent] == [1, 0, 1]
    assert (worker.replier.answered, worker.replier.duplicates) == (2, 1)
    assert fake_redis.xlen(keys.decisions) == 2
    assert fake_redis.xpending(keys.requests, "chain")["pending"] == 0
