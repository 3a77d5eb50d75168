"""The README's Python example runs as written against a real chain worker with the example
hooks, and prints what the README says it prints."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import redis

from hookbus.bus.keys import Keys
from hookbus.workers.fleet.heartbeat import list_workers
from tests.blocking_helpers import wait_for

ROOT = Path(__file__).resolve().parents[2]


def readme_python_example() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## From Python") :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "README has no python example under 'From Python'"
    return match.group(1)


def test_the_readme_python_example_prints_the_guard_s_deny(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env.update(HOOKBUS_REDIS_URL=real_redis_url, HOOKBUS_NAMESPACE=namespace)
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hookbus",
            "worker",
            "--role",
            "chain",
            "--hooks-dir",
            str(ROOT / "examples" / "hooks"),
        ],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(
            lambda: [
                w
                for w in list_workers(real_redis, Keys.for_namespace(namespace))
                if w.pid == worker.pid
            ],
            what="the chain worker's heartbeat",
        )
        out = subprocess.run(
            [sys.executable, "-c", readme_python_example()],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        worker.terminate()
        worker.wait(timeout=20)
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.splitlines()[:2]
    assert first == "deny False"
    assert "destructive command" in second
    assert real_redis.xlen(Keys.for_namespace(namespace).events) == 1
