"""The chain worker's request handling on fakeredis: reply, exactly-once, expiry,
reclaim and dead letters. Timing, blocking reads and real processes are tested on a real
server in tests/integration."""

from __future__ import annotations

import threading
import time
from typing import Any

import fakeredis
import pytest

from hookbus.bus import reqrep
from hookbus.bus.keys import CHAIN_GROUP
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Decision, Event, decode, encode, now_ms
from hookbus.workers.chain.worker import ChainWorker
from tests.chain_helpers import StubRegistry, send_request, serve_all


def _settings(ns: str = "chainunit", **workers: int) -> Settings:
    import msgspec

    base = Settings(namespace=ns)
    if workers:
        base = msgspec.structs.replace(
            base, workers=msgspec.structs.replace(base.workers, **workers)
        )
    return base


def _worker(
    client: fakeredis.FakeRedis, registry: StubRegistry, worker_id: str = "w1", **kw: Any
) -> ChainWorker:
    worker = ChainWorker(_settings(**kw), registry, client=client, worker_id=worker_id)  # type: ignore[arg-type]
    worker.ensure_group()
    worker.clock.refresh(client)
    return worker


def _read(worker: ChainWorker, client: fakeredis.FakeRedis, consumer: str = "w1") -> list[Any]:
    found: Any = client.xreadgroup(CHAIN_GROUP, consumer, {worker.keys.requests: ">"}, count=100)
    return found[0][1] if found else []


def test_a_request_is_answered_acknowledged_and_logged_in_one_flush(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    registry = StubRegistry()
    worker = _worker(fake_redis, registry)
    keys = worker.keys
    sent = send_request(fake_redis, keys, Event(kind="PreToolUse", payload={"tool_name": "Bash"}))
    serve_all(worker)
    raw = fake_redis.lpop(keys.reply(sent.id))
    assert raw is not None
    decision = decode(raw, Decision)  # type: ignore[arg-type]
    assert decision.outcome == "deny"
    assert decision.reason == "no shell"
    assert decision.worker == "w1"
    assert decision.request_id == sent.id
    assert fake_redis.pttl(keys.reply(sent.id)) == -2  # popped; it had a TTL while it lived
    assert fake_redis.xpending(keys.requests, CHAIN_GROUP)["pending"] == 0
    (log_entry,) = fake_redis.xrange(keys.decisions)
    fields = log_entry[1]
    assert fields[b"worker"] == b"w1"
    assert fields[b"outcome"] == b"deny"
    assert fields[b"id"] == sent.id.encode()
    assert worker.answered == 1
    left = registry.calls[0][1]
    assert left is not None and 4.0 < left <= 5.0


def test_the_reply_list_expires_when_nobody_pops_it(fake_redis: fakeredis.FakeRedis) -> None:
    worker = _worker(fake_redis, StubRegistry())
    sent = send_request(fake_redis, worker.keys, Event(kind="PreToolUse"))
    serve_all(worker)
    ttl = fake_redis.pttl(worker.keys.reply(sent.id))
    assert 0 < ttl <= worker.settings.streams.reply_ttl_s * 1000


def test_an_async_producer_gets_its_reply_in_its_inbox_stream(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    worker = _worker(fake_redis, StubRegistry())
    inbox = worker.keys.inbox("producer-1")
    fake_redis.xadd(inbox, {"k": "1"}, maxlen=0)  # the producer creates its inbox
    sent = send_request(fake_redis, worker.keys, Event(kind="PreToolUse"), inbox=inbox)
    serve_all(worker)
    ((_, fields),) = fake_redis.xrange(inbox)
    assert fields[reqrep.INBOX_ID_FIELD] == sent.id.encode()
    assert decode(fields[reqrep.INBOX_DECISION_FIELD], Decision).outcome == "allow"
    assert fake_redis.pttl(inbox) == -1  # the producer, not the worker, keeps it alive


def test_a_reply_to_an_inbox_that_has_expired_leaves_no_key_behind(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    worker = _worker(fake_redis, StubRegistry())
    inbox = worker.keys.inbox("gone")
    send_request(fake_redis, worker.keys, Event(kind="PreToolUse"), inbox=inbox)
    serve_all(worker)
    assert fake_redis.exists(inbox) == 0
    assert fake_redis.xpending(worker.keys.requests, "chain")["pending"] == 0


def test_a_request_delivered_twice_is_answered_once(fake_redis: fakeredis.FakeRedis) -> None:
    worker = _worker(fake_redis, StubRegistry())
    sent = send_request(fake_redis, worker.keys, Event(kind="PreToolUse"))
    (entry,) = _read(worker, fake_redis, "w1")
    # a second worker takes it over (its lease lapsed) and answers first; w1 finishes later
    other = _worker(fake_redis, StubRegistry(), worker_id="w2")
    fake_redis.xclaim(worker.keys.requests, "chain", "w2", 0, [entry[0]])
    other.replier.flush([other.runner.process(*entry)])
    worker.replier.flush([worker.runner.process(*entry)])
    assert fake_redis.llen(worker.keys.reply(sent.id)) == 1
    assert [f[b"worker"] for _, f in fake_redis.xrange(worker.keys.decisions)] == [b"w2"]
    assert (other.answered, worker.answered, worker.duplicates) == (1, 0, 1)


def test_an_expired_request_is_dropped_acknowledged_and_counted(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    registry = StubRegistry()
    worker = _worker(fake_redis, registry)
    sent = send_request(fake_redis, worker.keys, Event(kind="PreToolUse", deadline=now_ms() - 1))
    serve_all(worker)
    assert registry.calls == []
    assert worker.expired == 1
    assert fake_redis.exists(worker.keys.reply(sent.id)) == 0
    assert fake_redis.xpending(worker.keys.requests, CHAIN_GROUP)["pending"] == 0


def test_a_crashing_chain_answers_with_the_kind_s_policy(fake_redis: fakeredis.FakeRedis) -> None:
    worker = _worker(fake_redis, StubRegistry(fail=True))
    sent = send_request(fake_redis, worker.keys, Event(kind="PreToolUse"))
    serve_all(worker)
    raw = fake_redis.lpop(worker.keys.reply(sent.id))
    decision = decode(raw, Decision)  # type: ignore[arg-type]
    assert decision.outcome == "deny"
    assert decision.degraded is True
    assert decision.reason is not None and "registry bug" in decision.reason


def test_a_reply_key_outside_the_namespace_gets_no_reply(fake_redis: fakeredis.FakeRedis) -> None:
    worker = _worker(fake_redis, StubRegistry())
    event = Event(kind="PreToolUse", deadline=now_ms() + 5_000, reply_to=worker.keys.bundle_stamp)
    fake_redis.xadd(worker.keys.requests, {reqrep.REQUEST_FIELD: encode(event)})
    serve_all(worker)
    assert fake_redis.exists(worker.keys.bundle_stamp) == 0
    assert fake_redis.xpending(worker.keys.requests, CHAIN_GROUP)["pending"] == 0


def test_an_undecodable_request_goes_straight_to_the_dead_letters(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    worker = _worker(fake_redis, StubRegistry())
    fake_redis.xadd(worker.keys.requests, {reqrep.REQUEST_FIELD: b"\xc1garbage"})
    serve_all(worker)
    ((_, fields),) = fake_redis.xrange(worker.keys.dead_letters)
    assert fields[b"reason"].startswith(b"undecodable")
    assert fake_redis.xpending(worker.keys.requests, CHAIN_GROUP)["pending"] == 0


def _reclaim(worker: ChainWorker) -> int:
    """Two reclaim passes: a consumer is taken over once found without a lease twice."""
    worker.reclaimer.idle_ms = lambda: 0  # type: ignore[method-assign]
    time.sleep(0.005)  # fakeredis's XPENDING IDLE 0 skips entries idle for 0 ms
    first = worker.reclaimer.reclaim()
    return first + worker.reclaimer.reclaim()


def test_an_abandoned_request_is_reclaimed_and_answered(fake_redis: fakeredis.FakeRedis) -> None:
    worker = _worker(fake_redis, StubRegistry())
    sent = send_request(fake_redis, worker.keys, Event(kind="PreToolUse"))
    _read(worker, fake_redis, "crashed")
    worker.reclaimer.idle_ms = lambda: 0  # type: ignore[method-assign]
    time.sleep(0.005)  # fakeredis's XPENDING IDLE 0 skips entries idle for 0 ms
    assert worker.reclaimer.reclaim() == 0  # suspected on the first pass
    assert worker.reclaimer.reclaim() == 1  # and taken over on the next
    decision = decode(fake_redis.lpop(worker.keys.reply(sent.id)), Decision)  # type: ignore[arg-type]
    assert decision.worker == "w1"
    assert decision.degraded is False
    assert fake_redis.xpending(worker.keys.requests, CHAIN_GROUP)["pending"] == 0


def test_entries_this_worker_is_running_are_not_reclaimed_by_itself(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    registry = StubRegistry()
    worker = _worker(fake_redis, registry)
    send_request(fake_redis, worker.keys, Event(kind="PreToolUse"))
    _read(worker, fake_redis, "w1")
    assert _reclaim(worker) == 0
    assert registry.calls == []


def test_a_live_worker_s_entries_are_never_taken_however_long_they_wait(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    from hookbus.workers.chain.lease import OwnerLease

    registry = StubRegistry()
    worker = _worker(fake_redis, registry)
    send_request(fake_redis, worker.keys, Event(kind="PreToolUse"))
    _read(worker, fake_redis, "busy")
    lease = OwnerLease(fake_redis, worker.keys.ns, "busy")  # type: ignore[arg-type]
    lease.renew()
    time.sleep(0.15)  # idle longer than any idle threshold the old reclaim used
    assert _reclaim(worker) == 0
    assert registry.calls == []
    lease.stop()  # its lease gone: now the entry is taken over
    assert _reclaim(worker) == 1
    assert len(registry.calls) == 1


def test_a_missing_group_is_created_and_an_existing_one_kept(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    worker = _worker(fake_redis, StubRegistry())
    worker.ensure_group()  # BUSYGROUP is fine
    groups = fake_redis.xinfo_groups(worker.keys.requests)
    assert [g["name"] for g in groups] == [CHAIN_GROUP.encode()]


def test_concurrency_below_one_is_refused(fake_redis: fakeredis.FakeRedis) -> None:
    with pytest.raises(ValueError, match="concurrency"):
        ChainWorker(_settings(), StubRegistry(), client=fake_redis, concurrency=0)  # type: ignore[arg-type]


def test_pool_mode_answers_every_request(fake_redis: fakeredis.FakeRedis) -> None:
    registry = StubRegistry()
    worker = ChainWorker(
        _settings(),
        registry,
        client=fake_redis,
        concurrency=3,
        stop_event=threading.Event(),  # type: ignore[arg-type]
    )
    worker.ensure_group()
    worker.clock.refresh(fake_redis)
    from concurrent.futures import ThreadPoolExecutor

    worker.reader.pool = ThreadPoolExecutor(3)
    sent = [send_request(fake_redis, worker.keys, Event(kind="PreToolUse")) for _ in range(7)]
    for _ in range(5):
        serve_all(worker)
    worker.reader.pool.shutdown(wait=True)
    assert all(fake_redis.llen(worker.keys.reply(s.id)) == 1 for s in sent)


def test_a_batch_s_answers_are_sent_with_the_next_read(fake_redis: fakeredis.FakeRedis) -> None:
    worker = _worker(fake_redis, StubRegistry())
    first = send_request(fake_redis, worker.keys, Event(kind="PreToolUse"))
    worker.tick()
    assert fake_redis.exists(worker.keys.reply(first.id)) == 0  # deferred, not lost
    second = send_request(fake_redis, worker.keys, Event(kind="PreToolUse"))
    worker.tick()
    assert fake_redis.llen(worker.keys.reply(first.id)) == 1
    worker.reader.flush_deferred()
    assert fake_redis.llen(worker.keys.reply(second.id)) == 1
    assert worker.answered == 2


def test_answers_lost_to_a_script_flush_are_resent_with_the_script_loaded(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    worker = _worker(fake_redis, StubRegistry())
    first = send_request(fake_redis, worker.keys, Event(kind="PreToolUse"))
    worker.tick()  # read and processed; the answer waits for the next read
    fake_redis.script_flush()
    worker.tick()
    assert fake_redis.llen(worker.keys.reply(first.id)) == 1
    assert worker.answered == 1


def test_a_dead_worker_s_long_backlog_is_taken_over_in_several_claims(
    fake_redis: fakeredis.FakeRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hookbus.workers.chain.reclaimer as reclaimer

    monkeypatch.setattr(reclaimer, "RECLAIM_COUNT", 2)
    worker = _worker(fake_redis, StubRegistry())
    sent = [send_request(fake_redis, worker.keys, Event(kind="PreToolUse")) for _ in range(3)]
    _read(worker, fake_redis, "crashed")
    assert _reclaim(worker) == 3
    assert all(fake_redis.llen(worker.keys.reply(s.id)) == 1 for s in sent)


def test_a_refused_command_is_logged_and_retried_not_fatal(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    stop = threading.Event()
    worker = ChainWorker(_settings(), StubRegistry(), client=fake_redis, stop_event=stop)  # type: ignore[arg-type]
    keys = worker.keys
    fake_redis.set(keys.requests, "not a stream")
    runner = threading.Thread(target=worker.run)
    runner.start()
    try:
        time.sleep(0.2)
        assert runner.is_alive()
        fake_redis.delete(keys.requests)
        end = time.monotonic() + 10
        while time.monotonic() < end and not fake_redis.exists(keys.requests):
            time.sleep(0.01)
        sent = send_request(fake_redis, keys, Event(kind="PreToolUse"))
        while time.monotonic() < end and not fake_redis.exists(keys.reply(sent.id)):
            time.sleep(0.01)
        assert fake_redis.llen(keys.reply(sent.id)) == 1
    finally:
        stop.set()
        runner.join(10)
    assert not runner.is_alive()
