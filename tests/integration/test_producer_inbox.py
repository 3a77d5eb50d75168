"""The sync client's reply inbox under a restricted Redis user (issue 16).

A producer user without XTRIM (older copies of the shipped ACL file) still gets every answer:
the inbox trim rides behind the reply's read and its refusal only stops the trimming.
"""

from __future__ import annotations

import logging
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from blocking import event, start_workers, stop_workers  # noqa: E402

from hookbus import HookBus  # noqa: E402
from hookbus.bus.keys import Keys  # noqa: E402
from hookbus.bus.settings.loader import Settings  # noqa: E402
from hookbus.producers import sync_connections  # noqa: E402
from tests.cluster_fixture import local_server  # noqa: E402


def test_a_producer_user_without_xtrim_gets_every_answer_past_the_trim_point(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sync_connections, "_trims_refused", False)
    with local_server() as server:
        admin = server.client()
        ns = f"acl{uuid.uuid4().hex[:6]}"
        admin.execute_command(
            "ACL", "SETUSER", "producer", "on", ">pw", "resetkeys", "-@all", "+@connection",
            "+xadd", "+xread", "+hgetall", "+time", "+get", "+multi", "+exec",
            "+xgroup|create", "+pexpire", f"~hookbus:{{{ns}}}:*",
        )  # fmt: skip
        procs = start_workers(server.url, ns, 1, admin)
        try:
            url = f"redis://producer:pw@127.0.0.1:{server.port}/0"
            with (
                caplog.at_level(logging.WARNING),
                HookBus(Settings(redis_url=url, namespace=ns)) as bus,
            ):
                decisions = [bus.request(event(), deadline_ms=2_000) for _ in range(250)]
        finally:
            stop_workers(procs)
        inboxes = list(admin.scan_iter(match=Keys.for_namespace(ns).inbox("*")))
        admin.close()
    assert [d.reason for d in decisions if d.degraded] == []
    refused = [r for r in caplog.records if "refused XTRIM" in r.getMessage()]
    assert len(refused) == 1  # said once, then no more trims
    assert len(inboxes) == 1
