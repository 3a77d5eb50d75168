"""``hookbus worker --role chain`` as a real process, driven by the SDK and by
``hookbus publish --wait``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import redis

from hookbus import HookBus
from hookbus.bus.keys import Keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event
from hookbus.workers.fleet.heartbeat import list_workers
from tests.blocking_helpers import wait_for

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "hooks"


def _env(url: str, ns: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(HOOKBUS_REDIS_URL=url, HOOKBUS_NAMESPACE=ns, PYTHONPATH=str(ROOT))
    return env


def test_the_worker_command_serves_the_example_guard_to_sdk_and_publish_wait(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    env = _env(real_redis_url, namespace)
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hookbus",
            "worker",
            "--role",
            "chain",
            "--hooks-dir",
            str(EXAMPLES),
        ],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    keys = Keys.for_namespace(namespace)
    try:
        info = wait_for(
            lambda: [w for w in list_workers(real_redis, keys) if w.pid == worker.pid],
            what="the worker's heartbeat",
        )[0]
        assert info.role == "chain"
        assert info.hooks > 0

        settings = Settings(redis_url=real_redis_url, namespace=namespace)
        with HookBus(settings) as bus:
            decision = bus.request(
                Event(
                    kind="PreToolUse",
                    payload={"tool_name": "Bash", "tool_input": {"command": "rm -rf /"}},
                ),
                deadline_ms=3_000,
            )
        assert decision.outcome == "deny"
        assert decision.degraded is False
        assert decision.worker == info.id

        published = subprocess.run(
            [
                sys.executable,
                "-m",
                "hookbus",
                "--json",
                "publish",
                "PreToolUse",
                "--wait",
                "--deadline-ms",
                "3000",
                "--payload",
                '{"tool_name":"Bash","tool_input":{"command":"rm -rf /"}}',
            ],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert published.returncode == 2, published.stderr
        assert json.loads(published.stdout)["outcome"] == "deny"

        worker.send_signal(signal.SIGTERM)
        assert worker.wait(15) == 0
        assert [w for w in list_workers(real_redis, keys) if w.pid == worker.pid] == []
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(10)
        if worker.stderr:
            worker.stderr.close()
