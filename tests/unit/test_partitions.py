"""Partitioned keys and cluster URLs (issue 16 point 2): pure functions, no server."""

from __future__ import annotations

import zlib

import pytest
from redis.crc import key_slot

from hookbus.bus import keys
from hookbus.bus.connection import check_url, connect, is_cluster_url
from hookbus.bus.keys import Keys, partition_of
from hookbus.bus.settings.loader import Settings
from hookbus.errors import ConfigError


def test_partition_zero_keeps_today_s_key_names() -> None:
    assert Keys.for_partition("ns", 0) == Keys.for_namespace("ns")
    assert Keys.for_namespace("ns").reply("r") == "hookbus:{ns}:rep:r"
    assert Keys.for_namespace("ns").inbox("p") == "hookbus:{ns}:inbox:p"


def test_a_partition_s_streams_and_reply_keys_share_one_hash_slot_of_their_own() -> None:
    part = Keys.for_partition("ns", 3)
    per_request = [part.requests, part.events, part.decisions, part.dead_letters]
    per_request += [part.reply("r"), part.inbox("p")]
    assert {key_slot(k.encode()) for k in per_request} == {key_slot(b"{ns:3}")}
    assert key_slot(b"{ns:3}") != key_slot(b"{ns}")
    assert part.requests == "hookbus:{ns:3}:req"


def test_heartbeats_bundles_and_reload_stay_in_the_namespace_s_own_slot() -> None:
    part, own = Keys.for_partition("ns", 2), Keys.for_namespace("ns")
    assert (part.workers, part.bundle_stamp, part.reload_channel, part.rq_queue) == (
        own.workers,
        own.bundle_stamp,
        own.reload_channel,
        own.rq_queue,
    )


def test_a_session_always_lands_in_the_same_partition_and_sessions_spread() -> None:
    assert partition_of("session-a", 8) == zlib.crc32(b"session-a") % 8
    assert partition_of("session-a", 8) == partition_of("session-a", 8)
    assert partition_of("session-a", 1) == 0
    assert partition_of(None, 8) == 0
    spread = {partition_of(f"s{i}", 4) for i in range(100)}
    assert spread == {0, 1, 2, 3}


def test_a_negative_partition_is_refused() -> None:
    with pytest.raises(ValueError, match="partitions count from 0"):
        keys.partition_base("ns", -1)


def test_the_partition_setting_is_bounded() -> None:
    assert Settings().partitions == 1
    with pytest.raises(ValueError, match="partitions: must be 1 to 1024"):
        Settings(partitions=0)


def test_cluster_urls_are_accepted_and_recognised() -> None:
    for url in ("redis+cluster://h:7000", "rediss+cluster://u:p@h:7000"):
        assert check_url(url) == url
        assert is_cluster_url(url)
    assert not is_cluster_url("redis://h:6379/0")


def test_a_cluster_url_without_a_slot_key_says_rq_needs_a_plain_redis() -> None:
    with pytest.raises(ConfigError, match=r"RQ does not support Redis Cluster.*rq\.redis_url"):
        connect("redis+cluster://127.0.0.1:1")
