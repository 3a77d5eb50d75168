"""Issue 12 row 10: ``hookbus dlq`` shows every dead letter, whatever its source: failed RQ
jobs and the entries the fan-out dispatcher and the chain workers gave up on."""

from __future__ import annotations

import json
from typing import Any

import redis
import typer
from typer.testing import CliRunner

from hookbus.bus import reqrep
from hookbus.bus.eventlog import EVENT_FIELD
from hookbus.bus.keys import FANOUT_GROUP, Keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event, encode
from hookbus.cli.fleet import dlq as dlq_cli
from hookbus.workers.chain.replier import Dead, Replier
from hookbus.workers.fanout.dispatcher import Dispatcher
from hookbus.workers.fleet.heartbeat import Heartbeat
from tests.fanout_helpers import Hook, StubRegistry
from tests.poison_helpers import deep_event_bytes

app = typer.Typer()
app.add_typer(dlq_cli.app, name="dlq")


def test_dead_events_and_requests_are_listed_shown_requeued_and_purged(
    real_redis: redis.Redis, real_redis_url: str, namespace: str
) -> None:
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    keys = Keys.for_namespace(namespace)
    # an event the dispatcher cannot decode
    dispatcher = Dispatcher(
        settings, StubRegistry([Hook("t", ("Stop",))]), bus=real_redis, rq=real_redis
    )
    dispatcher.ensure_group()
    real_redis.xadd(keys.events, {EVENT_FIELD: deep_event_bytes(10_000, id="deep")})
    dispatcher.step()
    # a request a chain worker gave up on
    request = Event(kind="PreToolUse")
    entry_id = real_redis.xadd(keys.requests, {reqrep.REQUEST_FIELD: encode(request)})
    beat = Heartbeat(real_redis, keys, role="chain", interval_ms=1000, info=dict)
    replier = Replier(real_redis, settings, keys, "w1", beat)
    dead_fields = {reqrep.REQUEST_FIELD: encode(request)}
    replier.flush([Dead(entry_id, dead_fields, 3, "too many deliveries")])  # type: ignore[arg-type]

    runner = CliRunner()
    env = {"HOOKBUS_REDIS_URL": real_redis_url, "HOOKBUS_NAMESPACE": namespace}

    def cli(*args: str) -> Any:
        return runner.invoke(app, ["dlq", *args], env=env)

    listed = json.loads(cli("list", "--json").stdout)
    assert listed["total"] == 2
    by_error = {job["error"]: job for job in listed["jobs"]}
    assert "too many deliveries" in by_error
    assert any("nested too deep" in error for error in by_error)
    dead_request = by_error["too many deliveries"]
    assert dead_request["id"].startswith("dl-")
    assert (dead_request["event"], dead_request["kind"], dead_request["tries"]) == (
        request.id,
        "PreToolUse",
        3,
    )
    shown = json.loads(cli("show", dead_request["id"], "--json").stdout)
    assert shown["events_data"][0]["id"] == request.id
    assert shown["meta"]["group"] == "chain"

    refused = cli("requeue", dead_request["id"])
    assert refused.exit_code == 1 and "cannot be requeued" in refused.output
    assert cli("purge", dead_request["id"]).exit_code == 0
    assert json.loads(cli("list", "--json").stdout)["total"] == 1
    assert real_redis.xpending(keys.events, FANOUT_GROUP)["pending"] == 0
