"""Supervised sessions end to end (issue 14's done-when): agents in real tmux sessions run
``hookbus claude-code hook``; ``hookbus dev`` (chain worker, fan-out, RQ worker) runs the
wake-supervisor hook on the real server; each supervisor is the example stub, which logs
every wake to ``<logs>/<openclaw_session_id>.log``.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from hookbus.bus import keys
from hookbus.supervisor.agent_registry import AgentRegistry
from hookbus.supervisor.tmux_driver import TmuxServer

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_HOOK = ROOT / "examples" / "supervisor" / "hooks" / "wake-supervisor"
ANSWER = "Write NOTES.md with what you did, then run the tests again."
SECTIONS = (
    "[SESSION IDENTITY]",
    "[TRIGGER]",
    "[STATE HINT]",
    "[PANE CONTENT]",
    "[CONTEXT PRESSURE]",
    "[AVAILABLE ACTIONS]",
)
SCREEN = (
    "Pick the next step\\n"
    "❯ 1. Fix the failing test\\n"
    "  2. Write the docs\\n"
    "Enter to select · esc to cancel\\n"
    "opus | Context: 72%% | main\\n"
)
# the agent CLI's hook command (the lean path, as settings.json runs it)
HOOK = [sys.executable, "-c", "import sys; from hookbus.harnesses.lean.hook import main; "
        "sys.exit(main('claude-code', sys.argv[1:]))"]  # fmt: skip


def wait_until(condition: Any, timeout_s: float, what: str) -> Any:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    pytest.fail(f"timed out after {timeout_s} s waiting for {what}")


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    return tmp_path / "supervisors"


@pytest.fixture
def fleet(
    real_redis: redis.Redis, real_redis_url: str, namespace: str, tmp_path: Path, logs: Path
) -> Iterator[dict[str, str]]:
    """The registry (warden bidirectional, forge async) and ``hookbus dev`` serving the
    example wake hook, its log folder pointed at this test's."""
    registry = AgentRegistry(real_redis, namespace)
    registry.set(
        "warden",
        [
            ("tmux_session_name", "warden-main"),
            ("openclaw_session_id", "oc-warden"),
            ("hook_mode", "bidirectional"),
        ],
    )
    registry.set(
        "forge", [("tmux_session_name", "forge-main"), ("openclaw_session_id", "oc-forge")]
    )
    hooks = tmp_path / "hooks"
    shutil.copytree(EXAMPLE_HOOK, hooks / "wake-supervisor")
    manifest = hooks / "wake-supervisor" / "HOOK.toml"
    text = manifest.read_text().replace(
        "--answer 'Summarise what you did in NOTES.md, then continue with the next task.'",
        f"--log-dir {shlex.quote(str(logs))} --answer {shlex.quote(ANSWER)} "
        f"--delay-file {shlex.quote(str(tmp_path / 'delay'))}",
    )
    manifest.write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HOOKBUS_", "TMUX"))}
    env.update(HOOKBUS_REDIS_URL=real_redis_url, HOOKBUS_NAMESPACE=namespace, PYTHONPATH=str(ROOT))
    # a bidirectional wake holds a chain thread while its supervisor thinks: with one thread
    # every guard of the namespace would wait behind it (see the README)
    env["HOOKBUS_WORKERS__CONCURRENCY"] = "4"
    dev_log = (tmp_path / "dev.log").open("w")
    dev = subprocess.Popen(
        [sys.executable, "-m", "hookbus", "dev", "--hooks-dir", str(hooks)],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=dev_log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:

        def roles() -> set[str]:
            beats = real_redis.hgetall(keys.workers(namespace))
            return {json.loads(v).get("role") for v in beats.values()}  # type: ignore[union-attr]

        wait_until(lambda: {"chain", "fanout"} <= roles(), 60, "hookbus dev's workers")
        yield env
    finally:
        os.killpg(dev.pid, signal.SIGTERM)
        try:
            dev.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(dev.pid, signal.SIGKILL)
            dev.wait()
        dev_log.close()


@pytest.fixture
def tmux() -> Iterator[TmuxServer]:
    server = TmuxServer(socket_name=f"hbwake-{uuid.uuid4().hex[:10]}")
    yield server
    subprocess.run(server.argv("kill-server"), capture_output=True, check=False)


def run_agent_hook(
    tmux: TmuxServer,
    env: dict[str, str],
    session: str,
    data: dict[str, Any],
    tmp_path: Path,
    *,
    timeout_s: float = 60,
) -> tuple[int, str]:
    """Start ``session`` showing a menu, then run the agent's hook in it with ``data`` on
    stdin; returns (exit code, stdout) of the hook."""
    out = tmp_path / f"{session}.out"
    inp = tmp_path / f"{session}.json"
    inp.write_text(json.dumps(data))
    hook = " ".join(shlex.quote(a) for a in HOOK)
    command = (
        f"printf '{SCREEN}'; {hook} --timeout 600 < {shlex.quote(str(inp))} "
        f"> {shlex.quote(str(out))}.tmp; echo $? >> {shlex.quote(str(out))}.tmp; "
        f"mv {shlex.quote(str(out))}.tmp {shlex.quote(str(out))}; sleep 120"
    )
    args = ["new-session", "-d", "-s", session, "-x", "120", "-y", "30"]
    for name in ("HOOKBUS_REDIS_URL", "HOOKBUS_NAMESPACE", "PYTHONPATH"):
        args += ["-e", f"{name}={env[name]}"]
    tmux.run(*args, command)
    text = wait_until(lambda: out.exists() and out.read_text(), timeout_s, f"{session}'s hook")
    *printed, code = text.rstrip("\n").split("\n")
    return int(code), "\n".join(printed)


def stop(session_id: str = "cc-1", **extra: Any) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "transcript_path": "/tmp/t.jsonl",
        "cwd": "/tmp",
        "hook_event_name": "Stop",
        "stop_hook_active": False,
        **extra,
    }


def test_an_async_wake_reaches_only_its_own_supervisor_with_all_six_sections(
    fleet: dict[str, str], tmux: TmuxServer, tmp_path: Path, logs: Path
) -> None:
    code, printed = run_agent_hook(tmux, fleet, "forge-main", stop(), tmp_path)
    assert (code, printed) == (0, "")  # async: the agent does not wait
    log = logs / "oc-forge.log"
    text = wait_until(
        lambda: log.exists() and log.read_text(), 30, "the wake of forge's supervisor"
    )
    positions = [text.index(section) for section in SECTIONS]
    assert positions == sorted(positions)
    assert "agent_id: forge\ntmux_session_name: forge-main" in text
    assert "[TRIGGER]\nresponse_complete" in text
    assert "[STATE HINT]\nmenu" in text
    assert "❯ 1. Fix the failing test\n  2. Write the docs\nEnter to select" in text
    assert "[CONTEXT PRESSURE]\n72% [WARNING]" in text
    assert "hookbus tmux forge-main choose <n>" in text
    time.sleep(1.0)  # give a wrong delivery time to show up
    assert sorted(p.name for p in logs.iterdir()) == ["oc-forge.log"]


def test_a_bidirectional_stop_returns_the_supervisors_reason_as_decision_block(
    fleet: dict[str, str], tmux: TmuxServer, tmp_path: Path, logs: Path
) -> None:
    code, printed = run_agent_hook(tmux, fleet, "warden-main", stop(), tmp_path)
    assert code == 0
    assert json.loads(printed) == {"decision": "block", "reason": ANSWER}
    text = (logs / "oc-warden.log").read_text()
    assert all(section in text for section in SECTIONS)
    assert '"decision": "block"' in text  # the message told the supervisor how to answer
    assert sorted(p.name for p in logs.iterdir()) == ["oc-warden.log"]


def test_a_supervisor_that_does_not_answer_in_time_lets_the_session_stop(
    fleet: dict[str, str],
    tmux: TmuxServer,
    tmp_path: Path,
    logs: Path,
    real_redis: redis.Redis,
    namespace: str,
) -> None:
    (tmp_path / "delay").write_text("30")
    out = tmp_path / "slow.out"
    inp = tmp_path / "slow.json"
    inp.write_text(json.dumps(stop()))
    hook = " ".join(shlex.quote(a) for a in HOOK)
    q = shlex.quote
    command = (
        f"printf '{SCREEN}'; {hook} --timeout 4 < {q(str(inp))} > {q(str(out))}.tmp "
        f"2> {q(str(out))}.err; echo $? >> {q(str(out))}.tmp; mv {q(str(out))}.tmp {q(str(out))}; "
        "sleep 120"
    )
    args = ["new-session", "-d", "-s", "warden-main", "-x", "120", "-y", "30"]
    for name in ("HOOKBUS_REDIS_URL", "HOOKBUS_NAMESPACE", "PYTHONPATH"):
        args += ["-e", f"{name}={fleet[name]}"]
    started = time.monotonic()
    tmux.run(*args, command)
    text = wait_until(lambda: out.exists() and out.read_text(), 30, "the hook")
    assert time.monotonic() - started < 10
    assert text.strip() == "0"  # exit 0 and no block: the session stops
    assert (logs / "oc-warden.log").exists()  # the supervisor got the wake, too late to answer
    # and the decision log says why the session stopped
    logged = b"".join(
        value
        for _, fields in real_redis.xrange(keys.decisions(namespace))
        for value in fields.values()
    )
    assert b"did not answer within" in logged
    assert b"the session stops" in logged


def test_outside_tmux_nothing_is_sent(fleet: dict[str, str], tmp_path: Path, logs: Path) -> None:
    done = subprocess.run(
        [*HOOK, "--timeout", "600"],
        input=json.dumps(stop()),
        capture_output=True,
        text=True,
        env=fleet,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0
    time.sleep(2.0)
    assert not logs.exists()


def test_with_stop_hook_active_nothing_is_sent(
    fleet: dict[str, str], tmux: TmuxServer, tmp_path: Path, logs: Path
) -> None:
    code, printed = run_agent_hook(
        tmux, fleet, "warden-main", stop(stop_hook_active=True), tmp_path
    )
    assert (code, printed) == (0, "")
    time.sleep(2.0)
    assert not logs.exists()


def test_a_guard_is_answered_while_a_supervisor_thinks(
    fleet: dict[str, str], tmux: TmuxServer, tmp_path: Path, logs: Path, namespace: str
) -> None:
    from hookbus import Event, HookBus
    from hookbus.bus.settings.loader import Settings

    (tmp_path / "delay").write_text("6")
    out = tmp_path / "thinking.out"
    inp = tmp_path / "thinking.json"
    inp.write_text(json.dumps(stop()))
    hook = " ".join(shlex.quote(a) for a in HOOK)
    command = f"{hook} --timeout 600 < {shlex.quote(str(inp))} > {shlex.quote(str(out))}; sleep 60"
    args = ["new-session", "-d", "-s", "warden-main", "-x", "120", "-y", "30"]
    for name in ("HOOKBUS_REDIS_URL", "HOOKBUS_NAMESPACE", "PYTHONPATH"):
        args += ["-e", f"{name}={fleet[name]}"]
    tmux.run(*args, command)
    wait_until(lambda: (logs / "oc-warden.log").exists(), 30, "the supervisor to start thinking")
    settings = Settings(redis_url=fleet["HOOKBUS_REDIS_URL"], namespace=namespace)
    with HookBus(settings) as bus:
        guard = Event(
            kind="PreToolUse", payload={"tool_name": "Bash", "tool_input": {"command": "ls"}}
        )
        decision = bus.request(guard, deadline_ms=1500)
    assert (decision.outcome, decision.degraded) == ("allow", False)
    assert not out.exists() or not out.read_text()  # the Stop is still waiting for its answer
    answer = wait_until(lambda: out.exists() and out.read_text(), 30, "the supervisor's answer")
    assert json.loads(answer) == {"decision": "block", "reason": ANSWER}
