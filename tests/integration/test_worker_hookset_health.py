"""A chain worker never answers non-degraded without a guard the bundle (or folder) declares:
a guard whose module is missing on this worker makes its kinds' answers denials, flagged
degraded, with the reason; ``status`` sees the worker as unhealthy. An enforcing hook that
is not a guard and cannot load there leaves its kinds to the failure policy, flagged
degraded: the chain without it is not the answer the bundle declares."""

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
from hookbus.workers.fleet.heartbeat import list_workers


def write_hook(root: Path, name: str, module_text: str | None, *, guard: bool = False) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    if module_text is not None:
        (folder / f"{name}_mod.py").write_text(module_text)
    (folder / "HOOK.toml").write_text(
        f'name = "{name}"\nevents = ["PreToolUse"]\nblocking = true\n'
        f"guard = {'true' if guard else 'false'}\n"
        f'[action.python]\nentrypoint = "{name}_mod:check"\n'
    )


@pytest.fixture(params=[True, False], ids=["guard", "not-a-guard"])
def hooks_dir(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    root = tmp_path / "hooks"
    root.mkdir()
    write_hook(root, "annotate", "def check(event):\n    return None\n")
    # the second hook's module is missing on this worker: it cannot load here
    write_hook(root, "guard", None, guard=request.param)
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


def test_a_worker_missing_a_declared_guard_denies_its_kinds_degraded(
    worker: Settings, real_redis: redis.Redis, hooks_dir: Path
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
    (beat,) = [w for w in list_workers(real_redis, keys) if w.role == "chain"]
    if "guard = false" in (hooks_dir / "guard" / "HOOK.toml").read_text():
        # an enforcing hook that is not a guard: its kind is answered by the kind's failure
        # policy (PreToolUse: deny), flagged degraded, never by the chain without it
        assert (decision.outcome, decision.degraded) == ("deny", True), decision
        assert "could not be loaded on this worker" in (decision.reason or "")
        assert decision.trace == []
        assert any("left out alone" in p for p in beat.problems), beat.problems
        assert beat.extra.get("missing_kinds") == ["PreToolUse"]
        assert beat.extra.get("healthy") is False
        return
    assert decision.degraded is True, f"answered {decision.outcome} with the guard missing"
    assert decision.outcome == "deny"
    assert decision.reason is not None and "guard" in decision.reason
    assert beat.extra.get("healthy") is False
    assert "PreToolUse" in str(beat.extra.get("unhealthy"))
