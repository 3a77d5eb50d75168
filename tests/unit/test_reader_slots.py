"""Reader slots: a bounded number of chain worker processes read each partition, every
partition always has a reader, and the slots spread evenly as processes come and go."""

from __future__ import annotations

import threading

import fakeredis
import pytest

from hookbus.workers.chain.partitions import ReaderSlots, fair_share


def test_the_fair_share_covers_every_slot_evenly() -> None:
    assert fair_share(4, 2, 1) == 4  # one process reads everything
    assert fair_share(4, 2, 2) == 4
    assert fair_share(4, 2, 3) == 3
    assert fair_share(4, 2, 8) == 1
    assert fair_share(4, 2, 200) == 1
    assert fair_share(6, 2, 4) == 3


def _fleet(client: fakeredis.FakeRedis, n: int, partitions: int = 4) -> list[ReaderSlots]:
    stop = threading.Event()
    return [
        ReaderSlots(
            client,
            "ns",
            f"proc{i}",
            partitions=partitions,
            readers=2,
            lease_ms=3_000,
            stop_event=stop,
        )
        for i in range(n)
    ]


def _rounds(fleet: list[ReaderSlots], n: int = 3) -> None:
    for _ in range(n):
        for member in fleet:
            member.rebalance()


def _readers(fleet: list[ReaderSlots], partitions: int = 4) -> list[int]:
    return [sum(member.holds(p) for member in fleet) for p in range(partitions)]


@pytest.mark.parametrize("processes", [1, 2, 3, 5, 8, 20])
def test_every_partition_is_read_by_one_or_two_processes_whatever_the_fleet(
    fake_redis: fakeredis.FakeRedis, processes: int
) -> None:
    fleet = _fleet(fake_redis, processes)
    _rounds(fleet)
    readers = _readers(fleet)
    assert all(1 <= r <= 2 for r in readers), readers
    if processes >= 2:
        assert readers == [2, 2, 2, 2]
    shares = sorted(len(member.reading()) for member in fleet)
    assert shares[-1] - shares[0] <= 1 or shares[0] == 0  # even, or a standby


def test_a_process_that_stops_hands_its_partitions_over(fake_redis: fakeredis.FakeRedis) -> None:
    fleet = _fleet(fake_redis, 3)
    _rounds(fleet)
    leaving = fleet.pop(0)
    leaving.stop()
    fake_redis.zrem("hookbus:{ns}:chain-members", leaving.process_id)
    _rounds(fleet)
    assert _readers(fleet) == [2, 2, 2, 2]


def test_a_dead_process_s_slots_are_taken_once_its_lease_runs_out(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    fleet = _fleet(fake_redis, 2, partitions=2)
    _rounds(fleet)
    dead = fleet.pop(0)
    for partition, slot in dead.held.items():  # its leases run out (fakeredis: no clock wait)
        fake_redis.delete(f"hookbus:{{ns}}:readers:{partition}:{slot}")
    _rounds(fleet, 1)
    assert _readers(fleet, 2) == [1, 1]


def test_a_process_over_its_share_gives_back_only_partitions_someone_else_reads(
    fake_redis: fakeredis.FakeRedis,
) -> None:
    fleet = _fleet(fake_redis, 1)
    _rounds(fleet)
    assert fleet[0].reading() == [0, 1, 2, 3]
    fleet += _fleet(fake_redis, 4)[1:]  # three more join
    fleet[0].rebalance()  # the old one sees 4 processes first: still the only reader
    assert fleet[0].reading() == [0, 1, 2, 3]
    _rounds(fleet)
    assert _readers(fleet) == [2, 2, 2, 2]
    assert max(len(member.reading()) for member in fleet) == 2


def test_zero_readers_per_partition_is_the_unbounded_fleet(fake_redis: fakeredis.FakeRedis) -> None:
    unbounded = ReaderSlots(
        fake_redis, "ns", "p", partitions=3, readers=0, lease_ms=3_000, stop_event=threading.Event()
    )
    unbounded.start()
    assert unbounded.reading() == [0, 1, 2]
    assert fake_redis.keys("*readers*") == []
