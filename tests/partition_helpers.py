"""Helpers of the partitioned-event tests (issue 16 point 2): an order-recording hook, the
sessions that cover every partition, and what each partition's stream holds."""

from __future__ import annotations

import textwrap
import threading
from pathlib import Path
from typing import Any

import redis
import typer

from hookbus.bus.keys import Keys, partition_of
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event
from hookbus.hooks.registry import HookRegistry
from hookbus.workers.fanout import jobs
from hookbus.workers.fanout.role import run_dispatcher
from hookbus.workers.fanout.rq_classes import make_worker

#: A non-blocking hook that counts each event it runs on (hash ``$FANOUT_RECORD_KEY``,
#: field = event id) and appends the event's ``payload["i"]`` to its session's list
#: (``$FANOUT_RECORD_KEY:order:<session>``): a count of 2 is an event run twice, a list out
#: of order is a session whose events ran out of order.
ORDER_HANDLER = textwrap.dedent(
    """
    import os

    import redis

    _client = None


    def record(event):
        global _client
        if _client is None:
            _client = redis.Redis.from_url(os.environ["FANOUT_RECORD_URL"])
        key = os.environ["FANOUT_RECORD_KEY"]
        pipe = _client.pipeline(transaction=False)
        pipe.hincrby(key, event.id, 1)
        pipe.rpush(f"{key}:order:{event.session_id}", event.payload["i"])
        pipe.execute()
    """
)


def write_order_hook(root: Path, name: str = "order") -> Path:
    """A python hook on PostToolUse running :data:`ORDER_HANDLER`'s ``record``."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "order_handler.py").write_text(ORDER_HANDLER)
    (folder / "HOOK.toml").write_text(
        f'name = "{name}"\nevents = ["PostToolUse"]\nblocking = false\n'
        '[action.python]\nentrypoint = "order_handler:record"\ntimeout_secs = 10\n'
    )
    return folder


def sessions_covering(partitions: int, per_partition: int = 2, prefix: str = "s") -> list[str]:
    """Session ids, ``per_partition`` of each partition (CRC-32 of the id, as producers
    choose), so a test knows every partition gets events."""
    found: dict[int, list[str]] = {p: [] for p in range(partitions)}
    i = 0
    while any(len(v) < per_partition for v in found.values()):
        session = f"{prefix}{i}"
        bucket = found[partition_of(session, partitions)]
        if len(bucket) < per_partition:
            bucket.append(session)
        i += 1
    return [s for p in range(partitions) for s in found[p]]


def order_of(client: redis.Redis, record_key: str, session: str) -> list[int]:
    """The ``payload["i"]`` of a session's events in the order the hook ran them."""
    return [int(v) for v in client.lrange(f"{record_key}:order:{session}", 0, -1)]


def counts(client: redis.Redis, record_key: str) -> dict[str, int]:
    """How often the hook ran on each event id."""
    return {k.decode(): int(v) for k, v in client.hgetall(record_key).items()}


def lengths(clients: list[redis.Redis], ns: str) -> list[int]:
    """XLEN of each partition's event stream (``clients[p]`` serves partition ``p``)."""
    return [int(c.xlen(Keys.for_partition(ns, p).events)) for p, c in enumerate(clients)]


def delete_partitions(client: redis.Redis, ns: str) -> None:
    """Delete the keys of a namespace's partitions 1.. (the shared fixture deletes ``{ns}``'s)."""
    from hookbus.bus.keys import partitions_pattern

    found = list(client.scan_iter(match=partitions_pattern(ns), count=1000))
    if found:
        client.delete(*found)


PARTITIONS = 4


class Recorder:
    """A static non-blocking hook's runs: (event id, session, payload["i"]), in run order."""

    def __init__(self, settings: Settings) -> None:
        self.runs: list[tuple[str, str | None, int]] = []
        self.lock = threading.Lock()
        self.registry = HookRegistry(settings.catalogue())

        @self.registry.hook("PostToolUse")
        def record(event: Event) -> None:
            with self.lock:
                self.runs.append((event.id, event.session_id, int(event.payload["i"])))


def start_dispatchers(settings: Settings, recorder: Recorder, n: int) -> list[threading.Thread]:
    stop = threading.Event()
    threads = [
        threading.Thread(
            target=run_dispatcher,
            args=(settings,),
            kwargs={"registry": recorder.registry, "stop_event": stop},
        )
        for _ in range(n)
    ]
    for thread in threads:
        thread.start()
    threads[0].stop = stop  # type: ignore[attr-defined]
    return threads


def stop_dispatchers(threads: list[threading.Thread]) -> None:
    threads[0].stop.set()  # type: ignore[attr-defined]
    for thread in threads:
        thread.join(15)
    assert not any(t.is_alive() for t in threads)


def run_jobs(settings: Settings, client: redis.Redis, recorder: Recorder) -> None:
    """Run every queued job in this process, in queue order (one RQ worker, burst)."""
    k = Keys.for_namespace(settings.namespace)
    ctx: Any = jobs.JobContext(settings=settings, registry=recorder.registry, bus=client, keys=k)
    jobs.install(ctx)
    try:
        worker = make_worker(settings, isolation="none", connection=client)
        worker.work(burst=True, logging_level="WARNING")
    finally:
        jobs.uninstall()


status_app = typer.Typer()


DYING_DISPATCHER = """
import os, signal, threading, time
from pathlib import Path
from hookbus.bus.settings.loader import load_settings
from hookbus.workers.fanout import dispatcher, role as fanout

acked = set()
lock = threading.Lock()

def die(self, plan):
    # every partition's jobs are enqueued and none of its entries acknowledged: then die
    with lock:
        acked.add(self.partition)
    while len(acked) < {partitions}:
        time.sleep(0.01)
    os.kill(os.getpid(), signal.SIGKILL)

dispatcher.Dispatcher._ack = die
fanout.run_dispatcher(load_settings().settings, hooks_dir=Path({hooks!r}))
"""


RESTARTED_DISPATCHER = """
from pathlib import Path
from hookbus.bus.settings.loader import load_settings
from hookbus.workers.fanout import role as fanout
fanout.run_dispatcher(load_settings().settings, hooks_dir=Path({hooks!r}), claim_min_idle_ms=1000)
"""
