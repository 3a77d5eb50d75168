"""The approval inbox under the shipped ``deploy/redis/users.acl``: the worker user parks
and expires, the producer user waits, the operator user decides."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from hookbus import HookBus
from hookbus.approvals.inbox import ApprovalInbox
from hookbus.bus.embedded import free_port
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event
from tests.approval_helpers import ask_payload, parked, start_worker, stop_worker, wait_for

ROOT = Path(__file__).resolve().parents[2]
ACL_FILE = ROOT / "deploy" / "redis" / "users.acl"


@pytest.fixture
def acl_server(tmp_path: Path) -> Iterator[int]:
    binary = shutil.which("redis-server")
    assert binary is not None, "redis-server is not installed"
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--aclfile", str(ACL_FILE),
         "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:

        def up() -> bool:
            try:
                with redis.Redis(port=port, protocol=2) as probe:
                    probe.ping()
            except redis.exceptions.AuthenticationError:
                return True  # up, and the default user is off
            except redis.exceptions.ConnectionError:
                return False
            return True

        wait_for(up, 10, "redis-server with the ACL file")
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


def _url(user: str, port: int) -> str:
    return f"redis://{user}:change-me-{user.removeprefix('hookbus-')}@127.0.0.1:{port}/0"


@pytest.mark.parametrize("partitions", [1, 2])
def test_each_user_does_its_part_of_an_approval(acl_server: int, partitions: int) -> None:
    worker = start_worker(
        _url("hookbus-worker", acl_server), "default", wait_s=3, partitions=partitions
    )
    producer = Settings(
        redis_url=_url("hookbus-producer", acl_server), namespace="default", partitions=partitions
    )
    operator = Settings(
        redis_url=_url("hookbus-operator", acl_server), namespace="default", partitions=partitions
    )
    inbox = ApprovalInbox(operator)
    answers: list[Any] = []
    try:
        with HookBus.from_settings(producer) as bus:
            wait_for(bus.workers_alive, 20, "the worker under its ACL user")
            threads = [
                threading.Thread(
                    target=lambda s=s: answers.append(
                        bus.request(Event(kind="PreToolUse", session_id=s, payload=ask_payload(s)))
                    ),
                    daemon=True,
                )
                for s in ("decided", "expires")
            ]
            for thread in threads:
                thread.start()
            items = parked(inbox, 2)
            decided = next(i for i in items if i.input == "decided")
            inbox.decide(decided.id, "allow", who="ann")
            started = time.monotonic()
            for thread in threads:
                thread.join(15)
            took = time.monotonic() - started
    finally:
        stop_worker(worker)
    outcomes = sorted((d.outcome, d.degraded, d.reason) for d in answers)
    assert outcomes == [
        ("allow", False, "allowed by operator:ann"),
        ("deny", True, "no operator decision within 3 s; policy deny"),
    ]
    assert took < 4.5  # the expiry came from the worker's sweep, not the producer's grace
