"""``hookbus dlq`` edges through typer's CliRunner, on the real server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import typer
from rq import Queue
from typer.testing import CliRunner

from hookbus.bus import keys
from hookbus.bus.settings.loader import Settings
from hookbus.cli.fleet import dlq as dlq_cli
from hookbus.workers.fanout.rq_classes import make_worker
from hookbus.workers.fanout.serializer import MsgpackSerializer

app = typer.Typer()
app.add_typer(dlq_cli.app, name="dlq")


@pytest.fixture
def cli(real_redis: redis.Redis, real_redis_url: str, namespace: str) -> Iterator[Any]:
    runner = CliRunner()
    env = {"HOOKBUS_REDIS_URL": real_redis_url, "HOOKBUS_NAMESPACE": namespace}

    def invoke(*args: str, input: str | None = None) -> Any:
        return runner.invoke(app, ["dlq", *args], env=env, input=input)

    yield invoke


def _dead_letters(client: redis.Redis, ns: str, n: int) -> None:
    """``n`` jobs that fail at once (they name a function hookbus workers refuse)."""
    queue = Queue(keys.rq_queue_name(ns), connection=client, serializer=MsgpackSerializer)
    for i in range(n):
        queue.enqueue("os.getcwd", job_id=f"bad-{i}")
    settings = Settings(namespace=ns)
    make_worker(settings, isolation="none", connection=client).work(
        burst=True, logging_level="WARNING"
    )


def test_list_says_so_when_there_are_no_dead_letters(cli: Any) -> None:
    out = cli("list")
    assert out.exit_code == 0
    assert "no dead letters" in out.stdout
    assert json.loads(cli("list", "--json").stdout) == {"total": 0, "jobs": []}


def test_requeue_needs_exactly_one_of_an_id_and_all(cli: Any) -> None:
    assert cli("requeue").exit_code == 64  # usage (was 2 before exit codes were separated)
    assert cli("requeue", "x", "--all").exit_code == 64
    missing = cli("requeue", "hb-nope")
    assert missing.exit_code == 1
    assert "no dead letter" in missing.output


def test_purge_asks_first_and_deletes_on_yes(
    cli: Any, real_redis: redis.Redis, namespace: str
) -> None:
    _dead_letters(real_redis, namespace, 3)
    table = cli("list")
    assert table.exit_code == 0 and "dead letters (3)" in table.stdout
    refused = cli("purge", input="n\n")
    assert refused.exit_code == 1
    assert json.loads(cli("list", "--json").stdout)["total"] == 3
    one = cli("purge", "bad-0", "--json")
    assert json.loads(one.stdout) == {"purged": 1}
    rest = cli("purge", input="y\n")
    assert rest.exit_code == 0 and "purged 2" in rest.stdout
    assert json.loads(cli("list", "--json").stdout)["total"] == 0
