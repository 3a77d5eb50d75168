"""Issue 12 row 7: hung python hooks must not exhaust the hook threads of a worker.

Before: every hung call kept one of 256 pool threads; once they were all taken every python
hook of the worker failed, answered with no degraded flag and nothing in ``status``. Now each
hook has a concurrency cap (its calls still running, abandoned ones included): past it, or
past its timeout, the hook answers by its ``on_error``, the decision is flagged degraded
naming the hook, the heartbeat counts it and names it as at its cap, and ``hookbus status``
shows it, while the other hooks keep their threads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from hookbus.bus import reqrep
from hookbus.bus.keys import Keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Decision, Event, decode, encode, now_ms
from hookbus.workers.chain.worker import run_chain_worker
from hookbus.workers.fleet.heartbeat import list_workers

pytestmark = pytest.mark.integration

#: More hung calls than the old pool had threads (256).
REQUESTS = 300


def _hook(root: Path, name: str, body: str, timeout: float, on_error: str) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / f"{name}_mod.py").write_text(body)
    (folder / "HOOK.toml").write_text(
        f'name = "{name}"\nevents = ["PreToolUse"]\nblocking = true\non_error = "{on_error}"\n'
        f'[action.python]\nentrypoint = "{name}_mod:check"\ntimeout_secs = {timeout}\n'
    )


@pytest.fixture
def worker(real_redis_url: str, namespace: str, tmp_path: Path) -> Iterator[Settings]:
    root = tmp_path / "hooks"
    # hangs 20 s per call (a hook stuck on a dead network peer), far past its 20 ms timeout
    _hook(root, "hangs", "import time\ndef check(event):\n    time.sleep(20)\n", 0.02, "allow")
    _hook(root, "fine", "def check(event):\n    return {'context': ['fine ran']}\n", 1.0, "deny")
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    stop = threading.Event()
    thread = threading.Thread(
        target=run_chain_worker,
        args=(settings,),
        kwargs={"hooks_dir": root, "stop_event": stop},
        daemon=True,
    )
    thread.start()
    try:
        yield settings
    finally:
        stop.set()
        thread.join(10)


def _ask(client: redis.Redis, keys: Keys) -> Decision:
    event = Event(kind="PreToolUse", payload={"tool_name": "Bash"}, deadline=now_ms() + 3_000)
    event.reply_to = keys.reply(event.id)
    client.xadd(keys.requests, {reqrep.REQUEST_FIELD: encode(event)})
    popped: Any = client.blpop([event.reply_to], timeout=5)
    assert popped is not None, "no answer"
    return decode(popped[1], Decision)


def test_hung_python_hooks_hit_their_cap_and_other_hooks_keep_running(
    worker: Settings, real_redis: redis.Redis
) -> None:
    keys = Keys.for_namespace(worker.namespace)
    end = time.monotonic() + 15
    while not [w for w in list_workers(real_redis, keys) if w.role == "chain"]:
        assert time.monotonic() < end, "the worker did not start"
        time.sleep(0.05)
    decisions = [_ask(real_redis, keys) for _ in range(REQUESTS)]
    last = decisions[-1]
    outcomes = {run.hook_id: run.outcome for run in last.trace}
    # the other hook still ran on a thread of its own
    assert outcomes.get("fine") == "continue", f"fine: {last.trace}"
    assert last.context == ["fine ran"]
    # the hung hook answered by its on_error (allow), flagged degraded and named
    assert outcomes.get("hangs") == "timeout"
    assert last.outcome == "allow"
    assert last.degraded is True
    assert last.reason is not None and "hangs" in last.reason
    errors = [run.error or "" for d in decisions for run in d.trace if run.hook_id == "hangs"]
    assert any("concurrency cap" in e for e in errors), errors[-1]
    assert all(d.degraded for d in decisions)

    def beat() -> dict[str, Any]:
        for w in list_workers(real_redis, keys):
            if w.role == "chain":
                return dict(w.extra)
        return {}

    def published(extra: dict[str, Any]) -> bool:
        """The heartbeat carries the cap and every timeout (it publishes them periodically,
        so the count may trail the answers for a beat)."""
        timeouts = extra.get("hook_failures", {}).get("hangs", {}).get("timeout")
        return "hangs" in (extra.get("hooks_at_cap") or {}) and timeouts == REQUESTS

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not published(beat()):
        time.sleep(0.1)
    extra = beat()
    assert extra.get("hook_failures", {}).get("hangs", {}).get("timeout") == REQUESTS
    at_cap = extra.get("hooks_at_cap") or {}
    assert "hangs" in at_cap and "fine" not in at_cap
    assert at_cap["hangs"]["abandoned"] >= at_cap["hangs"]["cap"]
    assert at_cap["hangs"]["refused"] > 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env.update(
        COLUMNS="200", HOOKBUS_REDIS_URL=worker.redis_url, HOOKBUS_NAMESPACE=worker.namespace
    )
    shown = subprocess.run(
        [sys.executable, "-m", "hookbus", "status"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert "AT CAP" in shown.stdout and "hangs" in shown.stdout, shown.stdout
    as_json = subprocess.run(
        [sys.executable, "-m", "hookbus", "status", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert as_json.returncode == 0, as_json.stderr
    chain = [w for w in json.loads(as_json.stdout)["workers"] if w["role"] == "chain"]
    assert "hangs" in chain[0]["hooks_at_cap"]
