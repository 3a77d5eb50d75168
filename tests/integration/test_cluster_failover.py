"""A master failover on a Redis Cluster is followed by every process, with no restart.

3 masters + 3 replicas, ``HOOKBUS_PARTITIONS=3``, two chain workers serving every
partition, an asyncio producer sending 40 requests a second over sessions of every
partition and a sync producer publishing events. The master holding the namespace's own
slot ``{ns}`` (heartbeats, partition 0) is SIGKILLed; its replica is promoted a few seconds
later. Requests of its partitions may be answered by policy until then; from 5 s after the
promotion on, every request is answered by the hooks and every publish lands, in the same
processes; and every answer given after the promotion has its decision-log record.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field

import redis

from hookbus import AsyncHookBus, HookBus
from hookbus.bus import keys as keymod
from hookbus.bus.connection import close_pools, node_url
from hookbus.bus.decision_batch import logged
from hookbus.bus.eventlog import EVENT_FIELD
from hookbus.bus.keys import Keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event, decode
from tests.cluster_fixture import local_cluster, namespace_spread
from tests.partition_helpers import sessions_covering
from tests.worst_day_helpers import Load, spawn_chain_worker, stop_processes, wait_for_heartbeats

PARTITIONS = 3
#: Requests per second and their deadline (ms).
RATE, DEADLINE_MS = 40, 300
#: How long after the promotion every request must be answered by the hooks again, in s.
RECOVERY_S = 5.0
#: How long the load runs on after the promotion, in s.
AFTER_PROMOTION_S = RECOVERY_S + 4.0


@dataclass
class Publishes:
    """What a publishing thread sent: (monotonic time, event id or None when refused)."""

    sent: list[tuple[float, str | None, str]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self, settings: Settings, sessions: list[str]) -> None:
        bus = HookBus(settings)
        try:
            i = 0
            while not self.stop.wait(0.05):
                session = sessions[i % len(sessions)]
                i += 1
                event = Event(kind="PostToolUse", session_id=session, payload={"i": i})
                try:
                    self.sent.append((time.monotonic(), bus.publish(event), ""))
                except Exception as exc:  # a refused publish is what is being counted
                    self.sent.append((time.monotonic(), None, str(exc)))
        finally:
            bus.close()


def test_a_master_failover_is_followed_by_every_process_without_a_restart() -> None:
    with local_cluster(3, replicas=1) as cluster:
        ns = namespace_spread(cluster.url, PARTITIONS, prefix="f")
        settings = Settings(redis_url=cluster.url, namespace=ns, partitions=PARTITIONS)
        own_slot = keymod.workers(ns)
        victim = cluster.master_port(own_slot)
        sessions = sessions_covering(PARTITIONS, per_partition=3)
        procs = [spawn_chain_worker(cluster.url, ns, partitions=PARTITIONS) for _ in range(2)]
        publishes = Publishes()
        try:
            wait_for_heartbeats(cluster.url, ns, 2, partitions=PARTITIONS)
            publisher = threading.Thread(target=publishes.run, args=(settings, sessions))
            publisher.start()

            async def main() -> tuple[Load, float, float]:
                bus = AsyncHookBus(settings)
                load = Load(bus, RATE, DEADLINE_MS, sessions)
                try:
                    await bus.request(Event(kind="PreToolUse"), deadline_ms=5_000)
                    sending = asyncio.create_task(load.run(60.0))
                    await asyncio.sleep(3.0)
                    cluster.kill(victim)
                    killed = time.monotonic()
                    promoted = await asyncio.to_thread(cluster.wait_promoted, own_slot, victim)
                    await asyncio.sleep(AFTER_PROMOTION_S)
                    sending.cancel()
                    await asyncio.gather(sending, return_exceptions=True)
                    await asyncio.sleep(DEADLINE_MS / 1000 + 0.2)  # the last answers
                finally:
                    await bus.close()
                return load, killed, promoted

            load, killed, promoted = asyncio.run(main())
            publishes.stop.set()
            publisher.join(10)
            restarted = [proc.pid for proc in procs if proc.poll() is not None]
        finally:
            publishes.stop.set()
            stop_processes(procs)
        assert not restarted, f"chain workers {restarted} exited"
        recovered = promoted + RECOVERY_S
        after = [a for a in load.answers if a.sent >= recovered]
        assert len(after) >= 100, f"only {len(after)} requests sent after the recovery"
        degraded = [a.reason for a in after if a.degraded]
        assert not degraded, (
            f"{len(degraded)} of {len(after)} requests sent more than {RECOVERY_S:g} s after "
            f"the promotion ({promoted - killed:.1f} s after the kill) were answered by "
            f"policy: {sorted(set(degraded))[:3]}"
        )
        refused = [why for at, got, why in publishes.sent if at >= recovered and got is None]
        assert not refused, f"{len(refused)} publishes refused after the recovery: {refused[:3]}"

        close_pools()
        alive = next(node.port for node in cluster.nodes if node.proc is not None)
        url = f"redis+cluster://127.0.0.1:{alive}"  # the URL's own node may be the dead one
        logged_ids: set[bytes] = set()
        published: set[str] = set()
        for partition in range(PARTITIONS):
            keys = Keys.for_partition(ns, partition)
            client = redis.Redis.from_url(node_url(url, keys.requests), protocol=2)
            logged_ids |= {fields[b"id"] for fields in logged(client, keys.decisions)}
            for _, fields in client.xrange(keys.events):
                published.add(decode(fields[EVENT_FIELD], Event).id)
            client.close()
        answered = [a for a in load.answers if a.sent >= promoted and not a.degraded]
        missing = [a for a in answered if a.event_id.encode() not in logged_ids]
        assert not missing, f"{len(missing)} of {len(answered)} answers have no decision record"
        landed = [got for at, got, _ in publishes.sent if at >= promoted and got is not None]
        assert landed and set(landed) <= published
