"""Dead-letter ids with partitions: ``dl-<entry id>`` in partition 0 (as before partitions),
``dl-p<p>:<entry id>`` in partition p > 0, and back."""

from __future__ import annotations

import pytest

from hookbus.workers.fleet.dead_stream import dead_id, is_stream_id, parse_id


def test_partition_0_keeps_the_plain_id() -> None:
    assert dead_id(0, b"1795531613297-0") == "dl-1795531613297-0"
    assert parse_id("dl-1795531613297-0") == (0, "1795531613297-0")


@pytest.mark.parametrize("partition", [1, 2, 11])
def test_a_partition_s_id_names_it_and_reads_back(partition: int) -> None:
    made = dead_id(partition, "1795531613297-3")
    assert made == f"dl-p{partition}:1795531613297-3"
    assert is_stream_id(made)
    assert parse_id(made) == (partition, "1795531613297-3")


def test_an_id_that_names_no_partition_is_left_to_the_stream_to_refuse() -> None:
    assert parse_id("dl-px:1-0") == (0, "px:1-0")
    assert parse_id("dl-nonsense") == (0, "nonsense")
