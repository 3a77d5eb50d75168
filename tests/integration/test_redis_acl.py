"""The shipped ``deploy/redis/users.acl`` on a real ``redis-server`` (issue 13 row 2): it
loads, each user can do its job (a whole blocking request goes through with the producer,
worker and operator users), and each denial holds."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from hookbus import HookBus
from hookbus.authoring import release
from hookbus.bus.decision_batch import logged
from hookbus.bus.keys import Keys, hook_history
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event
from hookbus.workers.fleet.heartbeat import list_workers
from tests.acl_helpers import ACL_FILE, NS, ROOT, acl_redis, client, url
from tests.reload_helpers import write_hook

KEYS = Keys.for_namespace(NS)
#: A partition other than 0 (``HOOKBUS_PARTITIONS`` > 1): its keys live in ``{default:2}``.
PART = Keys.for_partition(NS, 2)


@pytest.fixture(scope="module")
def acl_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    with acl_redis(tmp_path_factory.mktemp("acl-redis")) as server:
        yield server.port


def test_the_acl_file_has_no_comment_lines() -> None:
    lines = ACL_FILE.read_text().splitlines()
    assert lines and all(line.startswith("user ") for line in lines)


def test_the_default_user_is_off(acl_port: int) -> None:
    with (
        redis.Redis(port=acl_port, protocol=2) as anonymous,
        pytest.raises(redis.exceptions.AuthenticationError),
    ):
        anonymous.get("x")


@pytest.mark.parametrize(
    ("user", "command"),
    [
        # producers: no reading of others' requests or events, no fleet changes
        ("hookbus-producer", ("XRANGE", KEYS.requests, "-", "+")),
        ("hookbus-producer", ("XREADGROUP", "GROUP", "chain", "c", "STREAMS", KEYS.requests, ">")),
        ("hookbus-producer", ("XREAD", "STREAMS", KEYS.events, "0")),
        ("hookbus-producer", ("XREAD", "STREAMS", PART.events, "0")),
        ("hookbus-producer", ("XRANGE", PART.requests, "-", "+")),
        ("hookbus-producer", ("XADD", PART.decisions, "*", "a", "b")),
        ("hookbus-producer", ("XADD", KEYS.decisions, "*", "a", "b")),
        ("hookbus-producer", ("SET", KEYS.bundle_stamp, "forged")),
        ("hookbus-producer", ("HSET", KEYS.bundle("forged"), "meta", "{}")),
        ("hookbus-producer", ("PUBLISH", KEYS.reload_channel, "forged")),
        ("hookbus-producer", ("HSET", KEYS.workers, "w", "{}")),
        ("hookbus-producer", ("XADD", hook_history(NS), "*", "a", "b")),
        ("hookbus-producer", ("KEYS", "*")),
        ("hookbus-producer", ("GET", "hookbus:{other}:bundle")),
        ("hookbus-producer", ("FLUSHALL",)),
        ("hookbus-producer", ("CONFIG", "SET", "aclfile", "/tmp/x")),
        # producers: no scripts of their choosing, no deletes, expiry or trims of the streams
        ("hookbus-producer", ("EVAL", "while true do end", "0")),
        ("hookbus-producer", ("EVALSHA", "0" * 40, "0")),
        ("hookbus-producer", ("FUNCTION", "LIST")),
        ("hookbus-producer", ("PEXPIRE", KEYS.requests, "1")),
        ("hookbus-producer", ("PEXPIRE", KEYS.events, "1")),
        ("hookbus-producer", ("EXPIRE", PART.events, "1")),
        ("hookbus-producer", ("DEL", KEYS.requests)),
        ("hookbus-producer", ("DEL", KEYS.events)),
        ("hookbus-producer", ("UNLINK", PART.requests)),
        ("hookbus-producer", ("XTRIM", KEYS.events, "MAXLEN", "0")),
        ("hookbus-producer", ("XDEL", KEYS.requests, "1-1")),
        ("hookbus-producer", ("RENAME", KEYS.events, "x")),
        ("hookbus-producer", ("XGROUP", "DESTROY", KEYS.requests, "chain")),
        ("hookbus-producer", ("XGROUP", "CREATE", KEYS.requests, "g", "$", "MKSTREAM")),
        ("hookbus-producer", ("XADD", KEYS.inbox("someone"), "*", "d", "forged")),
        ("hookbus-producer", ("GET", KEYS.bundle_stamp)),
        # workers: run what is pushed, never push, never rewrite the history
        ("hookbus-worker", ("SET", KEYS.bundle_stamp, "forged")),
        ("hookbus-worker", ("HSET", KEYS.bundle("forged"), "meta", "{}")),
        ("hookbus-worker", ("ZADD", KEYS.bundle_history, "1", "forged")),
        ("hookbus-worker", ("XADD", hook_history(NS), "*", "a", "b")),
        ("hookbus-worker", ("DEL", hook_history(NS))),
        # workers: the decision log and dead letters are appended and trimmed, never deleted
        ("hookbus-worker", ("DEL", KEYS.decisions)),
        ("hookbus-worker", ("UNLINK", PART.decisions)),
        ("hookbus-worker", ("PEXPIRE", KEYS.decisions, "1")),
        ("hookbus-worker", ("EXPIRE", KEYS.decisions, "1")),
        ("hookbus-worker", ("RENAME", KEYS.decisions, KEYS.requests)),
        ("hookbus-worker", ("RENAME", KEYS.requests, KEYS.decisions)),
        ("hookbus-worker", ("XDEL", KEYS.decisions, "1-1")),
        ("hookbus-worker", ("DEL", KEYS.decisions + ":n")),
        ("hookbus-worker", ("GET", "hookbus:{other}:bundle")),
        ("hookbus-worker", ("XADD", "hookbus:{other:1}:events", "*", "a", "b")),
        ("hookbus-worker", ("FLUSHALL",)),
        ("hookbus-worker", ("ACL", "SETUSER", "hookbus-worker", "+@all", "~*")),
        # operators: the namespace, not the server
        ("hookbus-operator", ("FLUSHALL",)),
        ("hookbus-operator", ("CONFIG", "GET", "*")),
        ("hookbus-operator", ("GET", "hookbus:{other}:bundle")),
        ("hookbus-operator", ("XLEN", "hookbus:{other:1}:events")),
        ("hookbus-operator", ("ACL", "LIST")),
    ],
)
def test_each_user_is_denied_what_it_must_not_do(
    acl_port: int, user: str, command: tuple[str, ...]
) -> None:
    with client(acl_port, user) as c, pytest.raises(redis.exceptions.NoPermissionError):
        c.execute_command(*command)


def test_a_workers_script_cannot_delete_the_decision_log_either(acl_port: int) -> None:
    script = "return redis.call('DEL', KEYS[1])"
    with (
        client(acl_port, "hookbus-worker") as worker,
        pytest.raises(redis.exceptions.ResponseError, match=r"can't access|permission"),
    ):
        worker.eval(script, 1, KEYS.decisions)


def test_producers_may_send_and_read_replies(acl_port: int) -> None:
    with client(acl_port, "hookbus-producer") as c:
        c.execute_command("XADD", KEYS.requests, "MAXLEN", "~", "1000", "*", "r", "x")
        c.execute_command("XADD", KEYS.events, "*", "e", "x")
        assert c.blpop([KEYS.reply("nothing-yet")], timeout=1) is None
        c.hgetall(KEYS.workers)
        c.time()


def test_every_role_may_do_its_job_on_the_keys_of_a_partition(acl_port: int) -> None:
    with client(acl_port, "hookbus-producer") as producer:
        producer.execute_command("XADD", PART.requests, "MAXLEN", "~", "1000", "*", "r", "x")
        producer.execute_command("XADD", PART.events, "*", "e", "x")
        assert producer.blpop([PART.reply("nothing-yet")], timeout=1) is None
        assert producer.xread({PART.inbox("p1"): "0"}) == []
        producer.delete(PART.inbox("p1"))
    with client(acl_port, "hookbus-worker") as worker:
        for stream, group in ((PART.requests, "chain"), (PART.events, "fanout")):
            worker.xgroup_create(stream, group, id="0", mkstream=True)
            [(_, [(entry_id, _)])] = worker.xreadgroup(group, "w", {stream: ">"}, count=1)
            assert worker.xack(stream, group, entry_id) == 1
        worker.xadd(PART.decisions, {"d": "x"})
        worker.xadd(PART.dead_letters, {"d": "x"})
        worker.xadd(PART.inbox("p1"), {"r": "x"})
        worker.rpush(PART.reply("r1"), "x")
        worker.rpush("hookbus:{default:2}:batch:hook", "x")  # a batching hook's buffer
        worker.set("hookbus:{default:2}:batch-lock:hook", "me", px=1000)
        for keys in (KEYS, PART):  # the marks of guarded tool calls, the unguarded ones
            worker.zadd(keys.guarded_calls(), {"a\x1fs\x1fid:t1": 1})
            worker.zremrangebyscore(keys.guarded_calls(), "-inf", 1)
            assert worker.zmscore(keys.guarded_calls(), ["a\x1fs\x1fid:t1"]) == [None]
            worker.xadd(keys.unguarded_calls(), {"agent": "a"}, maxlen=1000, approximate=True)
            worker.hincrby(keys.unguarded_counts(), "a\x1fclaude-code", 1)
    with client(acl_port, "hookbus-operator") as operator:
        assert [g["name"] for g in operator.xinfo_groups(PART.events)] == [b"fanout"]
        assert operator.xlen(PART.requests) == 1


def test_the_producer_user_publishes_to_every_partition(acl_port: int) -> None:
    settings = Settings(redis_url=url(acl_port, "hookbus-producer"), namespace=NS, partitions=4)
    sessions = [f"acl{i}" for i in range(40)]
    with HookBus(settings) as bus:
        bus.publish_many([Event(kind="PostToolUse", session_id=s) for s in sessions])
    with client(acl_port, "hookbus-operator") as operator:
        got = [operator.xlen(Keys.for_partition(NS, p).events) for p in range(4)]
    assert sum(got) >= 40 and min(got) > 0, got  # earlier tests may have added a few


def test_a_request_goes_through_with_the_three_users(acl_port: int, tmp_path: Path) -> None:
    hooks = tmp_path / "hooks"
    write_hook(hooks, "alpha")
    operator = client(acl_port, "hookbus-operator")
    pushed = release.release_folder(operator, Settings(namespace=NS), hooks, signing_key=None)
    env = dict(os.environ, HOOKBUS_REDIS_URL=url(acl_port, "hookbus-worker"))
    env.update(HOOKBUS_NAMESPACE=NS, PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(tmp_path / "c"))
    env.pop("HOOKBUS_VERIFY_KEY_FILE", None)
    worker_log = tmp_path / "worker.log"
    with worker_log.open("wb") as log_out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "hookbus", "worker", "--role", "chain"],
            env=env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=log_out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 20
        while not [w for w in list_workers(operator, KEYS) if w.version == pushed.version]:
            assert worker.poll() is None, worker_log.read_text()
            assert time.monotonic() < deadline, "the worker never ran the pushed bundle"
            time.sleep(0.05)
        settings = Settings(redis_url=url(acl_port, "hookbus-producer"), namespace=NS)
        with HookBus(settings) as bus:
            decision = bus.request(
                Event(kind="PreToolUse", payload={"tool_name": "Bash"}), deadline_ms=5_000
            )
        assert decision.degraded is False, decision.reason
        assert "ran:alpha" in decision.context
        # the worker settles its answers in bulk (ack_flush.lua): acked and logged, which
        # needs the shipped ACL to cover the decision log's size counter too
        deadline = time.monotonic() + 5
        while operator.xpending(KEYS.requests, "chain")["pending"]:
            assert time.monotonic() < deadline, worker_log.read_text()[-2000:]
            time.sleep(0.05)
        assert [r[b"outcome"] for r in logged(operator, KEYS.decisions)][-1:] == [b"allow"]
    finally:
        worker.terminate()
        worker.wait(15)
        operator.close()
