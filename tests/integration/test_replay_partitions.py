"""`hookbus replay` with ``HOOKBUS_PARTITIONS=3``: every partition's decision log is walked and
each request fetched from its own partition's request stream, so a decision recorded in
partition 1 that the candidate flips is reported (replay read partition 0's log only)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from hookbus import HookBus
from hookbus.bus.connection import bus_client, partition_client
from hookbus.bus.keys import Keys, partition_of
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event
from hookbus.workers.fleet.heartbeat import list_workers
from tests.blocking_helpers import wait_for
from tests.cluster_fixture import local_cluster, namespace_spread
from tests.partition_helpers import delete_partitions, sessions_covering
from tests.replay_helpers import ENV_GUARD, RM_GUARD, hooks_folder, run_replay

PARTITIONS = 3

#: The command each partition's session sends: the one the candidate flips is in partition 1.
COMMANDS = ("ls -la", "cat .env", "rm -rf /")


@pytest.fixture
def partitioned_env(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> Iterator[dict[str, str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env.update(
        HOOKBUS_REDIS_URL=real_redis_url,
        HOOKBUS_NAMESPACE=namespace,
        HOOKBUS_PARTITIONS=str(PARTITIONS),
    )
    yield env
    delete_partitions(real_redis, namespace)


def record(env: dict[str, str], folder_a: Path) -> dict[str, str]:
    """A chain worker serving ``folder_a`` on 3 partitions (``env``: the bus it serves)
    answers one request per partition (:data:`COMMANDS`, partition p's session sends
    ``COMMANDS[p]``); their request ids by command. Each partition's decision log, read on
    the master serving it, then holds its request's decision."""
    settings = Settings(
        redis_url=env["HOOKBUS_REDIS_URL"],
        namespace=env["HOOKBUS_NAMESPACE"],
        partitions=PARTITIONS,
    )
    clients = [partition_client(settings, p) for p in range(PARTITIONS)]
    worker = subprocess.Popen(
        [sys.executable, "-m", "hookbus", "worker", "--role", "chain", "-d", str(folder_a)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    keys = Keys.for_namespace(settings.namespace)
    ids: dict[str, str] = {}
    try:
        wait_for(
            lambda: [w for w in list_workers(bus_client(settings), keys) if w.pid == worker.pid],
            what="the chain worker's heartbeat",
        )
        with HookBus(settings) as bus:
            for session, command in zip(sessions_covering(PARTITIONS, 1), COMMANDS, strict=True):
                assert partition_of(session, PARTITIONS) == COMMANDS.index(command)
                event = Event(
                    kind="PreToolUse",
                    session_id=session,
                    payload={"tool_name": "Bash", "tool_input": {"command": command}},
                )
                decision = bus.request(event, deadline_ms=5000)
                assert not decision.degraded, decision
                assert decision.request_id
                ids[command] = decision.request_id
    finally:
        worker.terminate()
        worker.wait(timeout=20)
    for p, client in enumerate(clients):  # each partition logged its own request's decision
        logged = client.xlen(Keys.for_partition(settings.namespace, p).decisions)
        assert logged > 0, f"partition {p} logged no decision"
    return ids


@pytest.fixture
def recorded(partitioned_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """:func:`record` on the shared server."""
    return record(partitioned_env, hooks_folder(tmp_path / "a", **{"no-rm-rf": RM_GUARD}))


def test_replay_finds_a_changed_decision_recorded_in_partition_1(
    recorded: dict[str, str], partitioned_env: dict[str, str], tmp_path: Path
) -> None:
    folder_b = hooks_folder(tmp_path / "b", **{"no-rm-rf": RM_GUARD, "no-dotenv": ENV_GUARD})

    done = run_replay(partitioned_env, "--since", "10m", "--hooks-dir", str(folder_b), "--json")

    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["replayed"], report["missing"], report["degraded"]) == (3, 0, 0)
    (change,) = report["changed"]
    assert change["request_id"] == recorded["cat .env"]
    assert (change["before"], change["after"], change["hook"]) == ("allow", "deny", "no-dotenv")


def test_replay_counts_a_request_trimmed_from_its_partition_s_stream_missing(
    recorded: dict[str, str],
    partitioned_env: dict[str, str],
    real_redis: redis.Redis,
    namespace: str,
    tmp_path: Path,
) -> None:
    real_redis.xtrim(Keys.for_partition(namespace, 1).requests, maxlen=0)
    folder_b = hooks_folder(tmp_path / "b", **{"no-rm-rf": RM_GUARD, "no-dotenv": ENV_GUARD})

    wide = dict(partitioned_env, COLUMNS="200")  # the summary on one line
    done = run_replay(wide, "--since", "10m", "--hooks-dir", str(folder_b))

    assert done.returncode == 0, done.stderr
    assert "replayed 2 request(s); 0 would change (1 no longer in the request stream" in (
        done.stdout
    )


def test_on_a_cluster_replay_reads_each_partition_s_log_on_its_master(tmp_path: Path) -> None:
    with local_cluster(3) as cluster:
        ns = namespace_spread(cluster.url, PARTITIONS, prefix="rp")
        env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
        env.update(
            HOOKBUS_REDIS_URL=cluster.url,
            HOOKBUS_NAMESPACE=ns,
            HOOKBUS_PARTITIONS=str(PARTITIONS),
        )
        ids = record(env, hooks_folder(tmp_path / "a", **{"no-rm-rf": RM_GUARD}))
        folder_b = hooks_folder(tmp_path / "b", **{"no-rm-rf": RM_GUARD, "no-dotenv": ENV_GUARD})

        done = run_replay(env, "--since", "10m", "--hooks-dir", str(folder_b), "--json")

    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["replayed"], report["missing"]) == (3, 0)
    assert [c["request_id"] for c in report["changed"]] == [ids["cat .env"]]
