"""A ``hookbus dev`` fleet on the test's own namespace, and the tool calls the
unguarded-call tests send it: what those tests share."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hookbus.bus.wire import Event

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "hooks"


def fleet_env(url: str, ns: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env.update(HOOKBUS_REDIS_URL=url, HOOKBUS_NAMESPACE=ns, COLUMNS="250", **extra)
    return env


@contextlib.contextmanager
def dev_fleet(url: str, ns: str, cwd: Path, **env: str) -> Iterator[subprocess.Popen[str]]:
    """``hookbus dev`` with the shipped example hooks on ``url``/``ns`` (``env``: more
    ``HOOKBUS_*`` settings); stopped on exit."""
    dev = subprocess.Popen(
        [sys.executable, "-m", "hookbus", "dev", "--hooks-dir", str(EXAMPLES)],
        cwd=cwd,
        env=fleet_env(url, ns, **env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert dev.stdout is not None
        seen: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = dev.stdout.readline()
            if not line:
                pytest.fail("hookbus dev exited before it was ready:\n" + "".join(seen))
            seen.append(line)
            if "Press Ctrl-C to stop" in line:
                break
        else:
            pytest.fail("hookbus dev was not ready in 60 s:\n" + "".join(seen))
        yield dev
    finally:
        dev.send_signal(signal.SIGINT)
        try:
            dev.wait(20)
        except subprocess.TimeoutExpired:
            dev.kill()
            dev.wait(5)
        if dev.stdout is not None:
            dev.stdout.close()


def status_json(url: str, ns: str, cwd: Path) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "hookbus", "status", "--json"],
        cwd=cwd,
        env=fleet_env(url, ns),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    data: dict[str, Any] = json.loads(out.stdout)
    return data


def tool_call(
    kind: str,
    command: str,
    *,
    call_id: str | None = None,
    agent: str = "a1",
    session: str = "s1",
    harness: str = "claude-code",
) -> Event:
    """A tool call's guard request or post event, as an agent CLI's adapter sends it."""
    payload: dict[str, Any] = {"tool_name": "Bash", "tool_input": {"command": command}}
    if call_id is not None:
        payload["tool_use_id"] = call_id
    if kind != "PreToolUse":
        payload["tool_response"] = {"stdout": "", "exit_code": 0}
    return Event(
        kind=kind,
        session_id=session,
        agent_id=agent,
        payload=payload,
        meta={"harness": harness, "event_name": kind},
    )
