"""Issue 12 row 9: a chain worker never answers non-degraded with a hook set that lacks a
hook the bundle (or folder) declares: a guard whose module is missing on this worker makes
every answer the kind's policy, flagged degraded, with the reason; ``status`` sees the
worker as unhealthy."""

from __future__ import annotations

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
from hookbus.workers.fleet.worker_info import list_workers


def write_hook(root: Path, name: str, module_text: str | None) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    if module_text is not None:
        (folder / f"{name}_mod.py").write_text(module_text)
    (folder / "HOOK.toml").write_text(
        f'name = "{name}"\nevents = ["PreToolUse"]\nblocking = true\n'
        f'[action.python]\nentrypoint = "{name}_mod:check"\n'
    )


@pytest.fixture
def hooks_dir(tmp_path: Path) -> Path:
    root = tmp_path / "hooks"
    root.mkdir()
    write_hook(root, "annotate", "def check(event):\n    return None\n")
    # the guard's module is missing on this worker: it cannot load here
    write_hook(root, "guard", None)
    return root


@pytest.fixture
def worker(real_redis_url: str, namespace: str, hooks_dir: Path) -> Iterator[Settings]:
    settings = Settings(redis_url=real_redis_url, namespace=namespace)
    stop = threading.Event()
    thread = threading.Thread(
        target=run_chain_worker,
        args=(settings,),
        kwargs={"hooks_dir": hooks_dir, "stop_event": stop},
        daemon=True,
    )
    thread.start()
    try:
        yield settings
    finally:
        stop.set()
        thread.join(10)


def test_a_worker_missing_a_declared_guard_answers_by_policy_degraded(
    worker: Settings, real_redis: redis.Redis
) -> None:
    keys = Keys.for_namespace(worker.namespace)
    end = time.monotonic() + 15
    while not [w for w in list_workers(real_redis, keys) if w.role == "chain"]:
        assert time.monotonic() < end, "the worker did not start"
        time.sleep(0.05)
    event = Event(kind="PreToolUse", payload={"tool_name": "Bash"}, deadline=now_ms() + 5_000)
    event.reply_to = keys.reply(event.id)
    real_redis.xadd(keys.requests, {reqrep.REQUEST_FIELD: encode(event)})
    popped: Any = real_redis.blpop([event.reply_to], timeout=5)
    assert popped is not None
    decision = decode(popped[1], Decision)
    assert decision.degraded is True, f"answered {decision.outcome} with the guard missing"
    assert decision.outcome == "deny"  # PreToolUse's policy
    assert decision.reason is not None and "guard" in decision.reason
    (beat,) = [w for w in list_workers(real_redis, keys) if w.role == "chain"]
    assert beat.extra.get("healthy") is False
    assert "guard" in str(beat.extra.get("unhealthy"))
