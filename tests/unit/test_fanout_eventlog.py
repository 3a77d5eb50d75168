"""Publishing to the event log: one XADD per event, canonical kinds, refusals before sending."""

from __future__ import annotations

import asyncio

import fakeredis
import pytest

from hookbus.bus import eventlog, keys
from hookbus.bus.policy import backlog
from hookbus.bus.policy.backlog import Gates
from hookbus.bus.settings.loader import Settings, StreamSettings
from hookbus.bus.wire import Event, decode
from hookbus.errors import EventTooLarge, StreamBacklogFull, UnknownEventKind


def _settings(**streams: int) -> Settings:
    return Settings(namespace="evt", streams=StreamSettings(**streams))


def test_publish_appends_one_entry_holding_the_event_with_its_canonical_kind(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    event = Event(kind="after_tool_call", session_id="s1", payload={"tool_name": "Bash"})
    entry_id = eventlog.publish(fake_redis, _settings(), event)
    entries = fake_redis.xrange(keys.events("evt"))
    assert [e[0].decode() for e in entries] == [entry_id]
    stored = decode(entries[0][1][eventlog.EVENT_FIELD], Event)
    assert stored.kind == "PostToolUse"
    assert stored.id == event.id
    assert stored.payload == {"tool_name": "Bash"}


def test_publish_many_returns_entry_ids_in_order(fake_redis: fakeredis.FakeRedis) -> None:
    events = [Event(kind="Notification", payload={"n": i}) for i in range(5)]
    ids = eventlog.publish_many(fake_redis, _settings(), events)
    stored = fake_redis.xrange(keys.events("evt"))
    assert [e[0].decode() for e in stored] == ids
    assert [decode(e[1][b"e"], Event).payload["n"] for e in stored] == list(range(5))


def test_publish_many_of_nothing_sends_nothing(fake_redis: fakeredis.FakeRedis) -> None:
    assert eventlog.publish_many(fake_redis, _settings(), []) == []
    assert fake_redis.exists(keys.events("evt")) == 0


def test_an_unknown_kind_is_refused_before_anything_is_sent(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    with pytest.raises(UnknownEventKind):
        eventlog.publish(fake_redis, _settings(), Event(kind="NoSuchKind"))
    assert fake_redis.exists(keys.events("evt")) == 0


def test_a_custom_kind_from_config_may_be_published(fake_redis: fakeredis.FakeRedis) -> None:
    settings = Settings(namespace="evt", custom_kinds={"DeployDone": False})
    eventlog.publish(fake_redis, settings, Event(kind="DeployDone"))
    assert fake_redis.xlen(keys.events("evt")) == 1


def test_an_oversize_event_is_refused_and_one_bad_event_refuses_the_whole_batch(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    settings = _settings(max_event_bytes=200)
    big = Event(kind="PostToolUse", payload={"blob": "x" * 500})
    with pytest.raises(EventTooLarge) as info:
        eventlog.publish(fake_redis, settings, big)
    assert info.value.limit == 200
    with pytest.raises(EventTooLarge):
        eventlog.publish_many(fake_redis, settings, [Event(kind="PostToolUse"), big])
    assert fake_redis.exists(keys.events("evt")) == 0


def test_past_events_maxlen_publishes_are_refused_and_nothing_is_trimmed(
    fake_redis: fakeredis.FakeRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a full stream lets one probe through every CHECK_FULL_EVERY_S (0.1 s): a loaded
    # machine could take that long between the two calls, so the probe waits longer here
    monkeypatch.setattr(backlog, "CHECK_FULL_EVERY_S", 60.0)
    settings = _settings(events_maxlen=10)
    gates = Gates()
    batch = [Event(kind="Notification") for _ in range(300)]
    eventlog.publish_many(fake_redis, settings, batch, gates=gates)  # its first look: empty
    with pytest.raises(StreamBacklogFull) as info:
        eventlog.publish(fake_redis, settings, Event(kind="Notification"), gates=gates)
    assert "streams.events_maxlen = 10" in str(info.value)
    assert fake_redis.xlen(keys.events("evt")) == 300  # no event dropped unread


def test_the_async_twins_publish_the_same_entries() -> None:
    server = fakeredis.FakeServer()

    async def main() -> tuple[str, list[str]]:
        client = fakeredis.FakeAsyncRedis(server=server, protocol=2)
        try:
            one = await eventlog.apublish(client, _settings(), Event(kind="Stop"))
            many = await eventlog.apublish_many(
                client, _settings(), [Event(kind="SessionEnd"), Event(kind="SessionStop")]
            )
            return one, many
        finally:
            await client.aclose()

    one, many = asyncio.run(main())
    sync = fakeredis.FakeRedis(server=server, protocol=2)
    stored = sync.xrange(keys.events("evt"))
    assert [e[0].decode() for e in stored] == [one, *many]
    assert [decode(e[1][b"e"], Event).kind for e in stored] == ["Stop", "SessionEnd", "SessionEnd"]


def test_an_unreachable_redis_is_reported_as_redis_unavailable_naming_it() -> None:
    from hookbus.bus.connection import connect
    from hookbus.errors import RedisUnavailable

    client = connect("redis://127.0.0.1:1/0")
    with pytest.raises(RedisUnavailable) as info:
        eventlog.publish(client, _settings(), Event(kind="Stop"))
    assert "127.0.0.1:1" in str(info.value)
    with pytest.raises(RedisUnavailable):
        eventlog.publish_many(client, _settings(), [Event(kind="Stop")])
