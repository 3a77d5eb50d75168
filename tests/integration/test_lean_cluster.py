"""The per-event hook on a Redis Cluster (``redis+cluster://``): each command goes to the
master of its key's slot, a stale route is followed (MOVED, a master gone), and after a
master failover a new hook process reaches the promoted replica.

Private clusters on free ports (tests/cluster_fixture.py), a real chain worker, the real
``hookbus claude-code hook`` command.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
import redis
from starlette.testclient import TestClient

from hookbus.bus import keys
from hookbus.bus.resp import connect
from hookbus.bus.resp.cluster import ClusterConnection, key_slot
from hookbus.bus.settings.loader import Settings
from hookbus.harnesses.gateway import create_app
from tests.cluster_fixture import LocalCluster, LocalServer, free_port, local_cluster, namespace_on
from tests.lean_helpers import (
    chain_worker,
    pre_tool_use,
    private_env,
    run_hook,
    wait_for,
)

DENIED = {
    "hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": "denied by the fleet: PreToolUse",
    }
}


def cluster_client(cluster: LocalCluster) -> redis.cluster.RedisCluster:
    return redis.cluster.RedisCluster(host="127.0.0.1", port=cluster.nodes[0].port, protocol=2)


def master_of(cluster: LocalCluster, key: str) -> tuple[str, int] | None:
    """The master serving ``key``'s slot, as a node still up reports it."""
    slot = key_slot(key)
    for node in cluster.nodes:
        if node.proc is None or node.proc.poll() is not None:
            continue
        try:
            ranges = node.client().execute_command("CLUSTER", "SLOTS")
        except (redis.exceptions.RedisError, OSError):
            continue
        for first, last, master, *_ in ranges:
            if first <= slot <= last:
                return master[0].decode(), int(master[1])
    return None


def replicates(node: LocalServer, master_port: int) -> bool:
    info = node.client().info("replication")
    return bool(
        info.get("role") == "slave"
        and info.get("master_port") == master_port
        and info.get("master_link_status") == "up"
    )


def test_the_key_slot_is_redis_own(tmp_path: Path) -> None:
    from redis.crc import key_slot as redis_key_slot

    for key in ("a", "hookbus:{ns}:requests", "{user1000}.following", "foo{}{bar}", "{}x", "é"):
        assert key_slot(key) == redis_key_slot(key.encode()), key


@pytest.mark.timeout(180)
def test_the_hook_answers_a_guard_and_publishes_on_a_cluster(tmp_path: Path) -> None:
    with local_cluster(3) as cluster:
        # the namespace's slot on a master that is not the URL's seed: routing is needed
        ns = namespace_on(cluster.url, cluster.nodes[1].url)
        client = cluster_client(cluster)
        env = private_env(tmp_path, HOOKBUS_REDIS_URL=cluster.url, HOOKBUS_NAMESPACE=ns)
        with chain_worker(cluster.url, ns, client):
            code, out, err = run_hook(pre_tool_use("echo HOOKBUS_DENY"), env)
            assert (code, out) == (0, DENIED), err
            post = {**pre_tool_use("ls"), "hook_event_name": "PostToolUse", "tool_response": {}}
            assert run_hook(post, env)[:2] == (0, None)
            assert client.xlen(keys.events(ns)) == 1
            # the gateway answers from the same lean client, routed the same way
            settings = Settings(redis_url=cluster.url, namespace=ns)
            with TestClient(create_app(settings)) as gateway:
                answer = gateway.post("/v1/hooks/claude-code", json=pre_tool_use("HOOKBUS_DENY"))
                assert answer.status_code == 200
                assert answer.json() == DENIED
                assert gateway.get("/healthz").json()["ok"] is True
        client.close()


@pytest.mark.timeout(180)
def test_one_process_follows_a_moved_slot_and_a_master_that_is_gone(tmp_path: Path) -> None:
    with local_cluster(3) as cluster:
        ns = namespace_on(cluster.url, cluster.nodes[2].url)
        key = keys.workers(ns)
        conn = connect(cluster.url)
        assert isinstance(conn, ClusterConnection)
        with conn:
            assert conn.call("HSET", key, "w", "1") == 1
            assert conn.refreshes == 1  # the map read once, then used
            home = conn.master_of(key_slot(key))
            # a stale map naming the wrong master: its MOVED is followed
            wrong = next(
                (n.port for n in cluster.nodes if ("127.0.0.1", n.port) != home),
            )
            conn._ranges = [(0, 16383, ("127.0.0.1", wrong))]
            assert conn.call("HGET", key, "w") == b"1"
            assert conn.master_of(key_slot(key)) == home
            # a map naming a master that is gone: the map is read again
            conn._ranges = [(0, 16383, ("127.0.0.1", free_port()))]
            assert (
                conn.pipeline([("HGET", key, "w"), ("TIME",)], deadline=time.monotonic() + 5)[0]
                == b"1"
            )
            assert conn.master_of(key_slot(key)) == home

            # a slot being migrated: a key already moved is answered ASK, and asked there
            slot = key_slot(key)
            source = next(n for n in cluster.nodes if ("127.0.0.1", n.port) == home)
            target = next(n for n in cluster.nodes if n is not source)
            source_id = source.client().execute_command("CLUSTER", "MYID").decode()
            target_id = target.client().execute_command("CLUSTER", "MYID").decode()
            target.client().execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
            source.client().execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
            moved_key = keys.reply(ns, "migrated")  # not on the source: it is asked there
            before = conn.refreshes
            assert conn.call("SET", moved_key, "v") == b"OK"
            pipe = target.client().pipeline(transaction=False)  # one connection: ASKING, GET
            pipe.execute_command("ASKING")
            pipe.execute_command("GET", moved_key)
            assert pipe.execute()[1] == b"v"  # it was written on the importing node
            assert conn.refreshes == before  # ASK is one redirect, not a new map
            assert conn.master_of(slot) == home


@pytest.mark.timeout(240)
def test_after_a_master_failover_a_new_hook_process_reaches_the_promoted_master(
    tmp_path: Path,
) -> None:
    with local_cluster(3, replicas=1) as cluster:
        seed = cluster.nodes[0]
        victim = next(n for n in cluster.nodes[1:3])  # a master other than the seed
        ns = namespace_on(cluster.url, victim.url)
        key = keys.workers(ns)
        assert master_of(cluster, key) == ("127.0.0.1", victim.port)
        replica = wait_for(
            lambda: next((n for n in cluster.nodes[3:] if replicates(n, victim.port)), None),
            what="the victim's replica in sync",
        )
        env = private_env(tmp_path, HOOKBUS_REDIS_URL=cluster.url, HOOKBUS_NAMESPACE=ns)
        client = cluster_client(cluster)
        with chain_worker(cluster.url, ns, client):
            assert run_hook(pre_tool_use("echo HOOKBUS_DENY"), env)[:2] == (0, DENIED)
        client.close()

        assert victim.proc is not None
        os.kill(victim.proc.pid, signal.SIGKILL)
        victim.proc.wait(10)
        wait_for(
            lambda: master_of(cluster, key) == ("127.0.0.1", replica.port),
            timeout_s=60,
            what="the replica's promotion",
        )
        # the worker is a new process too (following a failover inside a running worker is
        # the SDK side's concern); the hook is started after the promotion, as Claude Code
        # starts one per event
        client = redis.cluster.RedisCluster(host="127.0.0.1", port=seed.port, protocol=2)
        wait_for(lambda: client.ping(), what="the cluster client")
        with chain_worker(cluster.url, ns, client):
            code, out, err = run_hook(pre_tool_use("echo HOOKBUS_DENY"), env)
        client.close()
        assert (code, out) == (0, DENIED), err
