"""The unguarded answer path of issue 16: while a worker's lease holds, a request costs one
reply XADD, and its XACK and decision-log record are settled in bulk by the ack ledger."""

from __future__ import annotations

import fakeredis
import msgspec
import pytest

from hookbus.bus import decision_batch, reqrep
from hookbus.bus import tail as tailing
from hookbus.bus.keys import CHAIN_GROUP
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Decision, Event, decode
from hookbus.workers.chain.ledger import decision_count_key
from hookbus.workers.chain.worker import ChainWorker
from tests.chain_helpers import StubRegistry, send_request, serve_all


def _worker(client: fakeredis.FakeRedis, settings: Settings | None = None) -> ChainWorker:
    worker = ChainWorker(
        settings or Settings(namespace="ledger"),
        StubRegistry(),  # type: ignore[arg-type]
        client=client,
        worker_id="w1",
    )
    worker.ensure_group()
    worker.clock.refresh(client)
    assert worker.lease.renew()  # the lease is held, as in a running worker
    return worker


def _inbox_request(client: fakeredis.FakeRedis, worker: ChainWorker, tool: str) -> Event:
    inbox = worker.keys.inbox("producer-1")
    client.xadd(inbox, {"hello": "1"})  # the producer creates its inbox before asking
    return send_request(
        client, worker.keys, Event(kind="PreToolUse", payload={"tool_name": tool}), inbox=inbox
    )


def _pending(client: fakeredis.FakeRedis, worker: ChainWorker) -> int:
    return int(client.xpending(worker.keys.requests, CHAIN_GROUP)["pending"])


def test_with_the_lease_held_a_reply_is_one_xadd_and_the_ack_waits_for_the_ledger(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    worker = _worker(fake_redis)
    sent = _inbox_request(fake_redis, worker, "Bash")
    serve_all(worker)
    reply = fake_redis.xrange(worker.keys.inbox("producer-1"))[-1][1]
    assert reply[reqrep.INBOX_ID_FIELD] == sent.id.encode()
    assert decode(reply[reqrep.INBOX_DECISION_FIELD], Decision).outcome == "deny"
    assert worker.answered == 1
    assert _pending(fake_redis, worker) == 1  # not acknowledged yet
    assert fake_redis.exists(worker.keys.decisions) == 0  # nor logged
    assert worker.replier.ledger.flush() == 1
    assert _pending(fake_redis, worker) == 0
    ((_, fields),) = fake_redis.xrange(worker.keys.decisions)
    (record,) = decision_batch.expand(fields)
    assert record[b"outcome"] == b"deny" and record[b"id"] == sent.id.encode()
    assert record[b"worker"] == b"w1"
    assert fake_redis.get(decision_count_key(worker.keys)) == b"1"


def test_a_batched_decision_is_shown_by_tail_like_a_single_one(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    worker = _worker(fake_redis)
    for tool in ("Bash", "Read", "Bash"):
        _inbox_request(fake_redis, worker, tool)
    serve_all(worker)
    worker.replier.ledger.flush()
    assert fake_redis.xlen(worker.keys.decisions) == 1  # one entry, three decisions
    shown = tailing.stream_last(fake_redis, worker.keys, decisions=True, n=10)
    assert [entry.outcome for entry in shown] == ["deny", "allow", "deny"]
    assert tailing.stream_last(fake_redis, worker.keys, decisions=True, n=2)[-1].outcome == "deny"


def test_after_the_lease_lapsed_what_was_read_before_goes_through_the_guarded_script(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    worker = _worker(fake_redis)
    _inbox_request(fake_redis, worker, "Bash")
    epoch = worker.replier.read_epoch()
    read = fake_redis.xreadgroup(CHAIN_GROUP, "w1", {worker.keys.requests: ">"}, count=10)
    ((entry_id, fields),) = read[0][1]
    worker.replier.stamp([entry_id], epoch)
    fake_redis.delete(worker.lease.key)  # expired while the worker was stopped...
    fake_redis.xack(worker.keys.requests, CHAIN_GROUP, entry_id)  # ...and another answered
    assert worker.lease.renew()  # the renewal finds the lease gone: a new epoch
    assert worker.lease.epoch == epoch + 1  # type: ignore[operator]
    worker.replier.flush([worker.runner.process(entry_id, fields)])
    assert worker.replier.duplicates == 1 and worker.answered == 0
    assert len(fake_redis.xrange(worker.keys.inbox("producer-1"))) == 1  # no second reply
    assert worker.replier.ledger.pending() == 0


def test_a_stale_lease_sends_answers_through_the_guarded_script(
    fake_redis: fakeredis.FakeRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = _worker(fake_redis)
    monkeypatch.setattr(worker.lease, "fresh_ms", 0)  # last renewal too long ago
    _inbox_request(fake_redis, worker, "Bash")
    serve_all(worker)
    assert worker.answered == 1
    assert _pending(fake_redis, worker) == 0  # acknowledged by the script at once
    assert worker.replier.ledger.pending() == 0
    ((_, fields),) = fake_redis.xrange(worker.keys.decisions)
    assert fields[b"outcome"] == b"deny" and b"b" not in fields


def _pending_entries(client: fakeredis.FakeRedis, worker: ChainWorker, n: int) -> list[bytes]:
    """``n`` request entries read by the worker (pending for it), not yet answered."""
    for _ in range(n):
        client.xadd(worker.keys.requests, {"e": b"x"})
    read = client.xreadgroup(CHAIN_GROUP, "w1", {worker.keys.requests: ">"}, count=n)
    return [entry_id for entry_id, _ in read[0][1]]


@pytest.mark.parametrize("held", [True, False], ids=["lease-held", "after-a-lapse"])
def test_the_batched_log_is_trimmed_by_decisions_not_entries(
    fake_redis: fakeredis.FakeRedis, held: bool
) -> None:
    base = Settings(namespace="trim")
    settings = msgspec.structs.replace(
        base, streams=msgspec.structs.replace(base.streams, decisions_maxlen=150)
    )
    worker = _worker(fake_redis, settings)
    record = {"id": b"x", "outcome": b"allow"}
    for _ in range(4):
        entries = _pending_entries(fake_redis, worker, 100)
        epoch = worker.lease.epoch if held else None
        worker.replier.ledger.add(
            [(entry_id, decision_batch.encode_record(record)) for entry_id in entries], epoch
        )
        assert worker.replier.ledger.flush() == 100
    kept = sum(
        len(decision_batch.expand(fields)) for _, fields in fake_redis.xrange(worker.keys.decisions)
    )
    assert 150 <= kept <= 250  # 400 written, the oldest batches dropped whole
    assert int(fake_redis.get(decision_count_key(worker.keys)) or 0) == kept
    assert fake_redis.xpending(worker.keys.requests, CHAIN_GROUP)["pending"] == 0


def test_entries_taken_over_meanwhile_are_neither_acknowledged_nor_logged_by_the_flush(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    worker = _worker(fake_redis)
    entries = _pending_entries(fake_redis, worker, 3)
    record = {"id": b"x", "outcome": b"allow"}
    worker.replier.ledger.add(
        [(e, decision_batch.encode_record(dict(record, entry=e))) for e in entries]
    )
    # while this worker was stopped, another took the middle one over (and logs it itself)
    fake_redis.xclaim(worker.keys.requests, CHAIN_GROUP, "w2", 0, [entries[1]])
    assert worker.replier.ledger.flush() == 2
    logged = decision_batch.logged(fake_redis, worker.keys.decisions)
    assert [r[b"entry"] for r in logged] == [entries[0], entries[2]]
    pending = fake_redis.xpending_range(worker.keys.requests, CHAIN_GROUP, "-", "+", 10)
    assert [(p["message_id"], p["consumer"]) for p in pending] == [(entries[1], b"w2")]
    assert worker.replier.ledger.already_acked == 1


def test_records_encoded_one_by_one_and_joined_read_back_as_one_batch() -> None:
    records = [
        decision_batch.DecisionRecord(
            id=b"r%d" % i,
            kind=b"PreToolUse",
            outcome=b"allow",
            worker=b"w1",
            entry=b"1-%d" % i,
            degraded=b"0",
            duration_us=b"5",
            session=b"s",
            agent=b"a",
            d=b"\x80",
        )
        for i in range(20)  # past 15: the array16 header
    ]
    blob = decision_batch.join_records([decision_batch.encode_record(r) for r in records])
    expanded = decision_batch.expand({b"b": blob, b"n": b"20"})
    assert [r[b"id"] for r in expanded] == [b"r%d" % i for i in range(20)]
    assert expanded[0] == {
        b"id": b"r0",
        b"kind": b"PreToolUse",
        b"outcome": b"allow",
        b"worker": b"w1",
        b"entry": b"1-0",
        b"degraded": b"0",
        b"duration_us": b"5",
        b"session": b"s",
        b"agent": b"a",
        b"d": b"\x80",
        b"tool": b"",  # what was asked: none given here
        b"input": b"",
    }


def test_a_batch_entry_that_does_not_decode_expands_to_nothing() -> None:
    assert decision_batch.expand({b"b": b"\xc1 not msgpack", b"n": b"3"}) == []
    single = {b"outcome": b"deny"}
    assert decision_batch.expand(single) == [single]


def test_a_ledger_whose_flushes_keep_failing_holds_a_bounded_number_of_entries(
    fake_redis: fakeredis.FakeRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hookbus.workers.chain import ledger as ack_ledger

    monkeypatch.setattr(ack_ledger, "MAX_HELD", 10)
    worker = _worker(fake_redis)
    worker.replier.ledger.add([(b"1-%d" % i, None) for i in range(25)])
    assert worker.replier.ledger.pending() == 10
    assert worker.replier.ledger.given_up == 15


def test_a_stop_whose_last_flush_redis_refuses_does_not_raise(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    worker = _worker(fake_redis)
    entries = _pending_entries(fake_redis, worker, 2)
    worker.replier.ledger.add([(entry_id, None) for entry_id in entries])
    fake_redis.delete(worker.keys.requests)  # gone, group and all: XPENDING says NOGROUP
    worker.replier.ledger.stop()
    assert worker.replier.ledger.pending() == 2  # kept, said in the log
