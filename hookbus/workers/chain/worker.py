"""The chain worker: answers blocking requests with the registry's priority chain.

The parts, each in its module: :mod:`~hookbus.workers.chain.reader` (XREADGROUP in the
group ``chain``, inline or on a thread pool), :mod:`~hookbus.workers.chain.runner`
(deadline by Redis time, running the chain, the policy answer when it fails),
:mod:`~hookbus.workers.chain.replier` (``reqrep.lua``: XACK, reply and decision-log entry in
one atomic call; dead letters), :mod:`~hookbus.workers.chain.lease` (the heartbeat that says this
worker's pending requests are its own) and :mod:`~hookbus.workers.chain.reclaimer` (requests of
workers whose lease expired). This module builds them, keeps the loop alive through Redis
outages and is what ``hookbus worker --role chain`` runs.

Partitions (``HOOKBUS_PARTITIONS`` > 1): a process serves every partition, one
:class:`ChainWorker` per partition on a thread of its own (worker id ``<id>.p<n>``), each
reading, answering and reclaiming its partition's stream in its consumer group; heartbeats,
leases and the clock stay in the namespace's own slot. On a Redis Cluster each partition's
commands go to the master serving its slot.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import redis
import redis.exceptions

from hookbus.bus import reqrep
from hookbus.bus.connection import (
    CONNECTION_ERRORS,
    bus_client,
    is_cluster_url,
    partition_client,
)
from hookbus.bus.keys import CHAIN_GROUP, Keys
from hookbus.workers.chain.clock import ClockKeeper
from hookbus.workers.chain.deaths import DeathWatch, bury
from hookbus.workers.chain.lease import OwnerLease
from hookbus.workers.chain.parking import ApprovalSweeper, Parking
from hookbus.workers.chain.partitions import ReaderSlots, wait_gate
from hookbus.workers.chain.reader import ChainReader
from hookbus.workers.chain.reclaimer import Reclaimer
from hookbus.workers.chain.replier import Replier
from hookbus.workers.chain.runner import ChainRunner
from hookbus.workers.fleet.announce import announce_start
from hookbus.workers.fleet.backoff import Backoff
from hookbus.workers.fleet.heartbeat import Heartbeat, new_worker_id
from hookbus.workers.fleet.metrics import start_worker_metrics
from hookbus.workers.fleet.respawn import Respawner, can_supervise
from hookbus.workers.fleet.stream_health import StreamWarden
from hookbus.workers.fleet.trimmer import StreamTrimmer, TrimmedStream
from hookbus.workers.reload.health import HookSetVerdict

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings
    from hookbus.hooks.registry import HookRegistry

log = logging.getLogger(__name__)


class ChainWorker:
    """One chain worker process's loop. Build it, call :meth:`run`, set ``stop_event``."""

    def __init__(
        self,
        settings: Settings,
        registry: HookRegistry,
        *,
        client: redis.Redis | None = None,
        concurrency: int = 1,
        worker_id: str | None = None,
        stop_event: threading.Event | None = None,
        info: Callable[[], dict[str, Any]] | None = None,
        partition: int = 0,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        self.settings = settings
        self.registry = registry
        #: The namespace's own slot: heartbeats, leases, clock.
        self.client = client if client is not None else bus_client(settings)
        self.keys = Keys.for_partition(settings.namespace, partition)
        #: This worker's partition's request stream (on a cluster, maybe another master).
        self.stream_client = self.client
        if partition and is_cluster_url(settings.effective_redis_url):
            self.stream_client = partition_client(settings, partition)
        self.concurrency = concurrency
        self.worker_id = worker_id or new_worker_id("chain")
        self.stop_event = stop_event or threading.Event()
        self.clock = reqrep.ServerClock()
        self.heartbeat = Heartbeat(
            self.client,
            self.keys,
            role="chain",
            interval_ms=settings.workers.heartbeat_interval_ms,
            info=info or self.default_info,
            worker_id=self.worker_id,
            concurrency=concurrency,
        )
        self.lease = OwnerLease(self.client, settings.namespace, self.worker_id)
        self.replier = Replier(
            self.stream_client,
            settings,
            self.keys,
            self.worker_id,
            self.heartbeat,
            self.lease,
            observes=getattr(registry, "observes", None),
        )
        self.runner = ChainRunner(
            settings,
            registry,
            clock=self.clock,
            replier=self.replier,
            heartbeat=self.heartbeat,
            worker_id=self.worker_id,
        )
        self.reader = ChainReader(
            self.stream_client,
            self.keys,
            worker_id=self.worker_id,
            concurrency=concurrency,
            runner=self.runner,
            replier=self.replier,
            stop_event=self.stop_event,
        )
        self.reclaimer = Reclaimer(
            self.stream_client,
            settings,
            self.keys,
            worker_id=self.worker_id,
            runner=self.runner,
            replier=self.replier,
            heartbeat=self.heartbeat,
            stop_event=self.stop_event,
            lease_client=self.client,
        )
        self.clock_keeper = ClockKeeper(self.client, self.clock, self.stop_event)
        # a request stream poisoned by an explicit id is moved aside and recreated
        self.warden = StreamWarden(
            self.stream_client,
            self.keys.requests,
            CHAIN_GROUP,
            maxlen=settings.streams.requests_maxlen,
            stop_event=self.stop_event,
        )
        self.runner.parking = Parking(
            settings, registry, self.keys, self.replier, self.worker_id, self.clock
        )
        self.sweeper = ApprovalSweeper(
            settings, self.stream_client, partition, self.clock, self.stop_event
        )
        self._reconnected = True  # False after a connection error: reload the script
        #: the process's reader slots: this partition is read only while it holds one
        self.slots: ReaderSlots | None = None

    def use_slots(self, slots: ReaderSlots) -> None:
        """Read, reclaim, sweep and watch this partition only while the process holds a
        reader slot."""
        self.slots = slots
        partition = self.keys.partition
        self.reclaimer.active = lambda: slots.holds(partition)
        self.sweeper.active = lambda: slots.holds(partition)
        self.warden.active = lambda: slots.holds(partition)

    # counters, for logs and tests
    @property
    def answered(self) -> int:
        return self.replier.answered

    @property
    def duplicates(self) -> int:
        return self.replier.duplicates

    @property
    def dead_lettered(self) -> int:
        return self.replier.dead_lettered

    @property
    def expired(self) -> int:
        return self.runner.expired

    def default_info(self) -> dict[str, Any]:
        """Heartbeat fields of a worker on a static registry (no HookHost)."""
        version = getattr(self.registry, "version", None)
        try:
            hooks = len(self.registry.hooks())
        except Exception:  # info for a heartbeat must never fail
            hooks = 0
        return {"version": version, "hooks": hooks, "problems": []}

    # --- lifecycle ----------------------------------------------------------------------

    def run(self) -> None:
        """Serve until ``stop_event`` is set; then finish in-flight chains and leave.

        Redis trouble never ends the loop: connection errors and refused commands are
        logged and retried with backoff, and a server that came back empty gets its
        consumer group and reply script again.
        """
        if not self._wait_for_redis():
            return
        self.lease.start()  # before the first read: what this worker reads is its own
        self.replier.ledger.start()
        self.heartbeat.start()
        self.reader.start()
        self.reclaimer.start()
        self.clock_keeper.start()
        self.sweeper.start()
        self.warden.start()
        log.info("chain worker %s serving %s", self.worker_id, self.keys.requests)
        backoff = Backoff()
        try:
            while not self.stop_event.is_set():
                try:
                    self.tick()
                    backoff.reset()
                    continue
                except CONNECTION_ERRORS as exc:
                    delay = backoff.next_s()
                    log.warning("Redis unavailable (%s); retrying in %.2f s", exc, delay)
                    self._reconnected = False
                except redis.exceptions.ResponseError as exc:
                    if "NOGROUP" in str(exc):
                        log.warning("consumer group missing (Redis restarted?); recreating it")
                        self._reconnected = False
                        continue
                    delay = backoff.next_s()
                    log.error("Redis refused a command (%s); retrying in %.2f s", exc, delay)
                except Exception:
                    delay = backoff.next_s()
                    log.exception("chain worker loop failed; retrying in %.2f s", delay)
                self.stop_event.wait(delay)
        finally:
            self._shutdown()

    def tick(self) -> None:
        """One step of the loop: server ready, one read and its chains (a standby for this
        partition only waits)."""
        if not wait_gate(self.slots, self.keys.partition, self.stop_event):
            return
        if not self._reconnected:
            # Redis may have restarted empty: group and reply script must be there before
            # answers ride with a blocking read (a NOSCRIPT would otherwise cost a resend)
            self._prepare_server()
        self.reader.tick()

    def _shutdown(self) -> None:
        self.reader.close()
        self.reclaimer.join(timeout=2.0)
        self.replier.ledger.stop()  # before the lease goes: what it answered is settled
        self.clock_keeper.join(timeout=2.0)
        self.sweeper.join(timeout=2.0)
        if self.warden.is_alive():
            self.warden.join(timeout=2.0)
        self.lease.stop()
        self.heartbeat.stop()
        log.info(
            "chain worker %s stopped: %d answered, %d expired, %d dead-lettered",
            self.worker_id,
            self.answered,
            self.expired,
            self.dead_lettered,
        )

    def _wait_for_redis(self) -> bool:
        """Create the group, load the script, sync the clock, retrying with backoff while
        Redis is down. False when asked to stop before Redis answered."""
        backoff = Backoff()
        while not self.stop_event.is_set():
            try:
                self._prepare_server()
                self.clock.refresh(self.client)
                return True
            except CONNECTION_ERRORS as exc:
                delay = backoff.next_s()
                log.warning("Redis unavailable (%s); retrying in %.2f s", exc, delay)
            except redis.exceptions.ResponseError as exc:
                delay = backoff.next_s()
                log.error("Redis refused a command (%s); retrying in %.2f s", exc, delay)
            self.stop_event.wait(delay)
        return False

    def _prepare_server(self) -> None:
        """What a (possibly restarted, empty) server needs before answers can flow."""
        self.ensure_group()
        self.replier.load_script()
        self._reconnected = True

    def ensure_group(self) -> None:
        """XGROUP CREATE ... 0 MKSTREAM; an existing group (BUSYGROUP) is fine."""
        try:
            self.stream_client.xgroup_create(self.keys.requests, CHAIN_GROUP, id="0", mkstream=True)
        except redis.exceptions.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise


def run_chain_worker(
    settings: Settings,
    *,
    concurrency: int = 1,
    hooks_dir: Path | None = None,
    registry: HookRegistry | None = None,
    stop_event: threading.Event | None = None,
    supervise: bool | None = None,
    metrics_port: int | None = None,
) -> None:
    """Run a chain worker until ``stop_event`` is set (the CLI sets it on SIGTERM/SIGINT).

    Hooks: a given ``registry`` without ``hooks_dir`` is used as it is (static hooks, for
    tests and embedding); otherwise a :class:`~hookbus.workers.reload.hookset.HookHost` loads the
    current bundle (or ``hooks_dir``) into it and follows reloads.

    ``supervise``: serve from a forked child that is restarted when a hook kills it
    (:mod:`~hookbus.workers.fleet.respawn`). By default, whenever forking is safe here: in a
    process whose main thread is its only thread, as under ``hookbus worker``.

    ``metrics_port``: serve Prometheus metrics there (from the serving process, the child
    when supervised; :mod:`~hookbus.workers.fleet.metrics`).
    """
    if supervise is None:
        supervise = can_supervise()
    if not supervise:
        _serve(settings, concurrency, hooks_dir, registry, stop_event, None, None, metrics_port)
        return
    stop = stop_event if stop_event is not None else threading.Event()
    respawner = Respawner(
        settings, stop, on_death=lambda client, worker_id: bury(client, settings, worker_id)
    )
    respawner.run(
        lambda worker_id: _serve(
            settings,
            concurrency,
            hooks_dir,
            registry,
            stop,
            worker_id,
            respawner.info,
            metrics_port,
        )
    )


def _serve(
    settings: Settings,
    concurrency: int,
    hooks_dir: Path | None,
    registry: HookRegistry | None,
    stop_event: threading.Event | None,
    worker_id: str | None,
    extra_info: Callable[[], dict[str, Any]] | None,
    metrics_port: int | None = None,
) -> None:
    """One chain worker in this process, following reloads when it has a HookHost."""
    client = bus_client(settings)
    host: Any = None
    if registry is None or hooks_dir is not None:
        from hookbus.workers.reload.hookset import HookHost

        if registry is None:
            from hookbus.hooks.registry import HookRegistry

            registry = HookRegistry.for_worker(settings, client, notices=True)
        host = HookHost(registry, settings, hooks_dir=hooks_dir)
        host.start(client)
        announce_start("chain", settings, host.info())

    def info() -> dict[str, Any]:
        if host is None:
            data = worker.default_info()
        else:
            problem = worker.runner.hook_set.unhealthy()
            data = {**host.info(), "healthy": problem is None, "unhealthy": problem}
        data["reads"] = slots.reading()
        if extra_info is not None:
            data.update(extra_info())
        return data

    worker = ChainWorker(
        settings,
        registry,
        client=client,
        concurrency=concurrency,
        worker_id=worker_id,
        stop_event=stop_event,
        info=info,
    )
    slots = ReaderSlots(
        client,
        settings.namespace,
        worker.worker_id,
        partitions=settings.partitions,
        readers=settings.workers.readers_per_partition,
        lease_ms=settings.workers.partition_lease_ms,
        stop_event=worker.stop_event,
    )
    # partitions 1.. on threads of their own, sharing the hooks, the client and the stop
    others = [
        ChainWorker(
            settings,
            registry,
            client=client,
            concurrency=concurrency,
            worker_id=f"{worker.worker_id}.p{partition}",
            stop_event=worker.stop_event,
            info=info,
            partition=partition,
        )
        for partition in range(1, settings.partitions)
    ]
    if host is not None:

        def judge_hook_set() -> None:
            verdict = HookSetVerdict.of(host.info())
            verdict.log_change(worker.runner.hook_set)
            for each in (worker, *others):
                each.runner.hook_set = verdict

        host.add_listener(judge_hook_set)  # before the beat, so the beat carries the verdict
        for each in (worker, *others):
            host.add_listener(each.heartbeat.beat_now)
        judge_hook_set()
    metrics, metrics_server = start_worker_metrics("chain", metrics_port, settings, client)
    worker.runner.metrics = metrics
    metrics.bundle_loaded(worker.registry.version)
    if host is not None:
        host.add_listener(lambda: metrics.bundle_loaded(worker.registry.version))
    for each in (worker, *others):
        each.use_slots(slots)
    _start_slots(slots, worker.stop_event)
    threads = [
        threading.Thread(target=other.run, name=f"chain-p{other.keys.partition}", daemon=True)
        for other in others
    ]
    for thread in threads:
        thread.start()
    trimmer = StreamTrimmer(
        [
            TrimmedStream(
                each.stream_client,
                each.keys.requests,
                "streams.requests_maxlen",
                settings.streams.requests_maxlen,
            )
            for each in (worker, *others)
        ],
        worker.stop_event,
    ).start()

    def reclaim_now() -> None:
        for each in (worker, *others):
            each.reclaimer.wake()

    name = f"hookbus-deaths.{worker.worker_id}"
    watch = DeathWatch(client, settings.namespace, name, reclaim_now, worker.stop_event).start()
    try:
        worker.run()
    finally:
        worker.stop_event.set()
        watch.join(timeout=2)
        trimmer.join(timeout=2)
        for thread in threads:
            thread.join(timeout=10)
        slots.stop()
        if metrics_server is not None:
            metrics_server.shutdown()
        if host is not None:
            host.stop()


_START_ERRORS: tuple[type[BaseException], ...] = (
    *CONNECTION_ERRORS,
    redis.exceptions.ResponseError,
)


def _start_slots(slots: ReaderSlots, stop_event: threading.Event) -> None:
    """Take this process's first reader slots, waiting out a Redis that is not there yet
    (the loop then keeps them; a worker that cannot reach Redis reads nothing anyway)."""
    backoff = Backoff()
    while not stop_event.is_set():
        try:
            slots.start()
            return
        except _START_ERRORS as exc:
            delay = backoff.next_s()
            log.warning("reader slots: Redis unavailable (%s); retrying in %.2f s", exc, delay)
            stop_event.wait(delay)
