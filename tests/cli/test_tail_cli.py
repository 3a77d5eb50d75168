"""``hookbus tail`` on the real server: the last entries, live ones, filters, decisions."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

HOOKBUS = str(Path(sys.executable).with_name("hookbus"))
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "hooks"

pytestmark = pytest.mark.integration


def env_for(url: str, ns: str, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env.update({"HOOKBUS_REDIS_URL": url, "HOOKBUS_NAMESPACE": ns})
    env["XDG_RUNTIME_DIR"] = str(tmp_path)  # no running `hookbus dev` elsewhere applies
    return env


def hookbus(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [HOOKBUS, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=60
    )


def test_tail_shows_the_last_events_filtered_by_kind_and_agent(
    tmp_path: Path, real_redis: redis.Redis, real_redis_url: str, namespace: str
) -> None:
    env = env_for(real_redis_url, namespace, tmp_path)
    for args in (
        ("Stop", "--agent", "a1"),
        ("PostToolUse", "--agent", "a2", "-p", '{"tool_name": "Bash"}'),
        ("after_tool_call", "--agent", "a1", "-p", '{"tool_name": "Edit"}'),
    ):
        assert hookbus("publish", *args, env=env, cwd=tmp_path).returncode == 0
    out = hookbus("tail", "--last", "3", "--count", "3", env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert [line.split()[1] for line in lines] == ["Stop", "PostToolUse", "PostToolUse"]
    assert "agent=a2" in lines[1] and "tool=Bash" in lines[1]

    args = ("tail", "--last", "3", "--count", "1", "--json", "--kind", "PostToolUse")
    out = hookbus(*args, "--agent", "a1", env=env, cwd=tmp_path)
    [line] = out.stdout.splitlines()
    data = json.loads(line)
    assert (data["source"], data["kind"], data["agent"]) == ("event", "PostToolUse", "a1")
    assert data["payload"] == {"tool_name": "Edit"}


def test_tail_follows_new_events_and_exits_after_count(
    tmp_path: Path, real_redis: redis.Redis, real_redis_url: str, namespace: str
) -> None:
    env = env_for(real_redis_url, namespace, tmp_path)
    hookbus("publish", "Stop", env=env, cwd=tmp_path)  # before the tail: not shown
    tail = subprocess.Popen(
        [HOOKBUS, "tail", "--count", "2", "--kind", "session_end", "--json"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    try:
        deadline = time.monotonic() + 30
        while tail.poll() is None and time.monotonic() < deadline:
            hookbus("publish", "Notification", env=env, cwd=tmp_path)  # filtered out
            hookbus("publish", "SessionEnd", env=env, cwd=tmp_path)
            time.sleep(0.1)
        out, _ = tail.communicate(timeout=10)
    finally:
        if tail.poll() is None:
            tail.send_signal(signal.SIGINT)
            tail.communicate(timeout=10)
    assert tail.returncode == 0
    kinds = [json.loads(line)["kind"] for line in out.splitlines()]
    assert kinds == ["SessionEnd", "SessionEnd"]


def test_tail_decisions_shows_who_denied_and_why(
    tmp_path: Path, real_redis: redis.Redis, real_redis_url: str, namespace: str
) -> None:
    env = env_for(real_redis_url, namespace, tmp_path)
    hooks = tmp_path / "hooks"
    shutil.copytree(EXAMPLES / "block-destructive", hooks / "block-destructive")
    worker = subprocess.Popen(
        [HOOKBUS, "worker", "--role", "chain", "--hooks-dir", str(hooks)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=tmp_path,
    )
    try:
        payload = json.dumps({"tool_name": "Bash", "tool_input": {"command": "rm -rf /"}})
        deadline = time.monotonic() + 30
        while True:  # until the worker is up and answers (not the degraded policy)
            asked = hookbus(
                "publish", "PreToolUse", "--wait", "--json", "--deadline-ms", "2000",
                "--agent", "a9", "-p", payload, env=env, cwd=tmp_path,
            )  # fmt: skip
            if not json.loads(asked.stdout)["degraded"] or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert asked.returncode == 2, asked.stdout
        out = hookbus("tail", "--decisions", "--last", "1", "--count", "1", env=env, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert " PreToolUse agent=a9 deny by block-destructive (" in out.stdout
        assert "refused: destructive command" in out.stdout
        js = hookbus("tail", "--decisions", "--last", "1", "--count", "1", "--json",
                     env=env, cwd=tmp_path)  # fmt: skip
        data = json.loads(js.stdout)
        assert (data["source"], data["outcome"], data["hook"]) == (
            "decision",
            "deny",
            "block-destructive",
        )
        assert data["degraded"] is False and data["duration_ms"] > 0
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)


def test_an_unknown_kind_is_a_usage_error(
    tmp_path: Path, real_redis_url: str, namespace: str
) -> None:
    out = hookbus("tail", "--kind", "Nope", env=env_for(real_redis_url, namespace, tmp_path),
                  cwd=tmp_path)  # fmt: skip
    assert out.returncode == 64
    assert "unknown event kind 'Nope'" in out.stderr
