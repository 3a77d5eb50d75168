"""Issue 12 row 10 with ``HOOKBUS_PARTITIONS`` > 1: ``hookbus dlq`` shows every partition's
dead letters (ids ``dl-p<p>:<entry id>``), shows, requeues into the event's own partition and
purges them, on one server and on a local Redis Cluster where each partition has its master.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
import typer
from typer.testing import CliRunner

from hookbus.bus import eventlog, reqrep
from hookbus.bus.connection import bus_client, partition_client
from hookbus.bus.keys import Keys, partition_of
from hookbus.bus.settings.loader import RQSettings, Settings
from hookbus.bus.wire import Event, decode, encode
from hookbus.cli.fleet import dlq as dlq_cli
from hookbus.workers.chain.replier import Dead, Replier
from hookbus.workers.fanout.dispatcher import Dispatcher
from hookbus.workers.fleet.heartbeat import Heartbeat
from tests.cluster_fixture import LocalCluster, LocalServer, local_cluster, local_server
from tests.cluster_fixture import namespace_spread as spread_namespace
from tests.fanout_helpers import Hook, StubRegistry
from tests.partition_helpers import delete_partitions, sessions_covering

app = typer.Typer()
app.add_typer(dlq_cli.app, name="dlq")

PARTITIONS = 3


class FailingRegistry(StubRegistry):
    """Matching fails: the dispatcher dead-letters the (decodable) event it read."""

    def matching(self, event: Event) -> list[Hook]:
        raise RuntimeError("the registry is broken")


def dead_event_in(settings: Settings, bus: redis.Redis, stream: redis.Redis, session: str) -> Event:
    """An event of ``session`` published and dead-lettered by its partition's dispatcher
    (``stream``: the client of that partition's master)."""
    event = Event(kind="Stop", session_id=session, payload={"why": "dlq test"})
    eventlog.publish(stream, settings, event)
    dispatcher = Dispatcher(
        settings,
        FailingRegistry([]),
        bus=bus,
        rq=bus,
        partition=partition_of(session, settings.partitions),
        stream=stream,
    )
    dispatcher.ensure_group()
    dispatcher.step()
    return event


def dead_request_in(
    settings: Settings, client: redis.Redis, partition: int, request: Event
) -> None:
    """A request of ``partition`` a chain worker gave up on (too many deliveries)."""
    keys = Keys.for_partition(settings.namespace, partition)
    entry_id = client.xadd(keys.requests, {reqrep.REQUEST_FIELD: encode(request)})
    beat = Heartbeat(client, keys, role="chain", interval_ms=1000, info=dict)
    replier = Replier(client, settings, keys, "w1", beat)
    dead_fields = {reqrep.REQUEST_FIELD: encode(request)}
    replier.flush([Dead(entry_id, dead_fields, 3, "too many deliveries")])  # type: ignore[arg-type]


def cli_for(env: dict[str, str]) -> Callable[..., Any]:
    runner = CliRunner()

    def cli(*args: str) -> Any:
        return runner.invoke(app, ["dlq", *args], env=env)

    return cli


def newest_event(client: redis.Redis, stream: str) -> Event:
    found: Any = client.xrevrange(stream, count=1)
    ((_, fields),) = found
    return decode(fields[eventlog.EVENT_FIELD], Event)


def check_partition_two(
    cli: Callable[..., Any], settings: Settings, clients: list[redis.Redis]
) -> None:
    """Dead letters of partition 2 are listed, shown, requeued into partition 2, purged."""
    ns = settings.namespace
    session = sessions_covering(PARTITIONS, 1)[2]
    event = dead_event_in(settings, clients[0], clients[2], session)
    request = Event(kind="PreToolUse", session_id=session)
    dead_request_in(settings, clients[2], 2, request)

    listed = json.loads(cli("list", "--json").stdout)
    assert listed["total"] == 2
    by_event = {job["event"]: job for job in listed["jobs"]}
    assert set(by_event) == {event.id, request.id}
    dead_event, dead_request = by_event[event.id]["id"], by_event[request.id]["id"]
    assert dead_event.startswith("dl-p2:") and dead_request.startswith("dl-p2:")
    assert "the registry is broken" in by_event[event.id]["error"]
    table = cli("list")
    assert table.exit_code == 0 and "dl-p2:" in table.stdout

    shown = json.loads(cli("show", dead_event, "--json").stdout)
    assert shown["id"] == dead_event
    assert shown["events_data"][0]["id"] == event.id
    assert shown["meta"]["stream"] == Keys.for_partition(ns, 2).events
    assert json.loads(cli("show", dead_request, "--json").stdout)["meta"]["group"] == "chain"

    events_before = [int(c.xlen(Keys.for_partition(ns, p).events)) for p, c in enumerate(clients)]
    requeued = cli("requeue", dead_event, "--json")
    assert requeued.exit_code == 0, requeued.output
    assert json.loads(requeued.stdout) == {"requeued": [dead_event]}
    events_after = [int(c.xlen(Keys.for_partition(ns, p).events)) for p, c in enumerate(clients)]
    assert events_after == [events_before[0], events_before[1], events_before[2] + 1]
    assert newest_event(clients[2], Keys.for_partition(ns, 2).events).id == event.id
    refused = cli("requeue", dead_request)
    assert refused.exit_code == 1 and "cannot be requeued" in refused.output

    assert json.loads(cli("list", "--json").stdout)["total"] == 1
    purged = cli("purge", dead_request, "--json")
    assert purged.exit_code == 0, purged.output
    assert json.loads(purged.stdout) == {"purged": 1}
    assert json.loads(cli("list", "--json").stdout) == {"total": 0, "jobs": []}
    assert int(clients[2].xlen(Keys.for_partition(ns, 2).dead_letters)) == 0


@pytest.fixture
def settings(real_redis: redis.Redis, real_redis_url: str, namespace: str) -> Iterator[Settings]:
    yield Settings(redis_url=real_redis_url, namespace=namespace, partitions=PARTITIONS)
    delete_partitions(real_redis, namespace)


def env_of(settings: Settings) -> dict[str, str]:
    env = {
        "HOOKBUS_REDIS_URL": settings.effective_redis_url,
        "HOOKBUS_NAMESPACE": settings.namespace,
        "HOOKBUS_PARTITIONS": str(settings.partitions),
    }
    if settings.rq.redis_url:
        env["HOOKBUS_RQ__REDIS_URL"] = settings.rq.redis_url
    return env


def test_a_dead_letter_of_partition_2_is_listed_shown_requeued_there_and_purged(
    settings: Settings, real_redis: redis.Redis
) -> None:
    check_partition_two(cli_for(env_of(settings)), settings, [real_redis] * PARTITIONS)


def test_purge_and_requeue_all_cover_every_partition(
    settings: Settings, real_redis: redis.Redis
) -> None:
    cli = cli_for(env_of(settings))
    sessions = sessions_covering(PARTITIONS, 1)
    events = [dead_event_in(settings, real_redis, real_redis, s) for s in sessions]
    ids = [job["id"] for job in json.loads(cli("list", "--json").stdout)["jobs"]]
    plain = [i for i in ids if not i.startswith("dl-p")]  # partition 0 keeps plain ids
    assert len(plain) == 1 and ":" not in plain[0]
    assert sorted(i.split(":")[0] for i in ids if i not in plain) == ["dl-p1", "dl-p2"]
    done = json.loads(cli("requeue", "--all", "--json").stdout)["requeued"]
    assert sorted(done) == sorted(ids)
    for p, event in enumerate(events):
        assert newest_event(real_redis, Keys.for_partition(settings.namespace, p).events) == event
    for p in range(PARTITIONS):
        dead_request_in(settings, real_redis, p, Event(kind="PreToolUse"))
    assert json.loads(cli("list", "--json").stdout)["total"] == PARTITIONS
    assert json.loads(cli("purge", "--yes", "--json").stdout) == {"purged": PARTITIONS}
    assert json.loads(cli("list", "--json").stdout)["total"] == 0


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with local_cluster(3) as started:
        yield started


@pytest.fixture(scope="module")
def rq_server() -> Iterator[LocalServer]:
    with local_server() as started:
        yield started


def test_on_a_cluster_each_partition_s_dead_letters_are_read_on_its_master(
    cluster: LocalCluster, rq_server: LocalServer
) -> None:
    ns = spread_namespace(cluster.url, PARTITIONS, prefix="dl")
    settings = Settings(
        redis_url=cluster.url,
        namespace=ns,
        partitions=PARTITIONS,
        rq=RQSettings(redis_url=rq_server.url),
    )
    clients = [bus_client(settings)] + [partition_client(settings, p) for p in (1, 2)]
    check_partition_two(cli_for(env_of(settings)), settings, clients)


def test_on_a_cluster_a_dead_event_of_partition_0_is_requeued_to_its_session_s_master(
    cluster: LocalCluster, rq_server: LocalServer
) -> None:
    """A dead event in ``{ns}:dead`` whose session is in partition 2 (where dispatchers wrote
    every dead event before they kept them in their partition) is published on partition
    2's master, and its dead letter dropped on partition 0's."""
    ns = spread_namespace(cluster.url, PARTITIONS, prefix="dm")
    settings = Settings(
        redis_url=cluster.url,
        namespace=ns,
        partitions=PARTITIONS,
        rq=RQSettings(redis_url=rq_server.url),
    )
    own, third = bus_client(settings), partition_client(settings, 2)
    event = Event(kind="Stop", session_id=sessions_covering(PARTITIONS, 1)[2])
    own.xadd(
        Keys.for_namespace(ns).dead_letters,
        {
            b"stream": Keys.for_partition(ns, 2).events,
            b"entry_id": b"1-0",
            b"group": b"fanout",
            b"reason": b"matching hooks failed",
            b"worker": b"old",
            b"e": encode(event),
        },
    )
    cli = cli_for(env_of(settings))
    (job,) = json.loads(cli("list", "--json").stdout)["jobs"]
    assert not job["id"].startswith("dl-p")

    done = cli("requeue", job["id"])

    assert done.exit_code == 0, done.output
    assert newest_event(third, Keys.for_partition(ns, 2).events).id == event.id
    assert int(own.xlen(Keys.for_namespace(ns).dead_letters)) == 0
