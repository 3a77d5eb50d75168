"""``hookbus worker --metrics-port``: real workers of every role, real traffic, ``/metrics``
scraped over HTTP; and, with ``--log-format json``, one JSON line per hook run.

A chain worker serves a guard (denies ``rm -rf``), a flaky hook (fails on ``crash``) and a
shadow hook; a fan-out dispatcher and an RQ worker serve a non-blocking telemetry hook. The
counters must say exactly what the test sent.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
import redis

from hookbus import HookBus
from hookbus.bus.keys import Keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event
from hookbus.workers.fleet.heartbeat import list_workers
from tests.blocking_helpers import wait_for

pytestmark = pytest.mark.integration

GUARD = (
    'name = "no-rm-rf"\nevents = ["PreToolUse"]\npriority = 10\n'
    '[action.shell]\ncommand = "sh run.sh"\ntimeout_secs = 5\n',
    "e=$(cat)\ncase \"$e\" in *'rm -rf'*) echo 'no recursive deletes' >&2; exit 2;; esac\n",
)
FLAKY = (
    'name = "flaky"\nevents = ["PreToolUse"]\npriority = 20\n'
    '[action.shell]\ncommand = "sh run.sh"\ntimeout_secs = 5\n',
    'e=$(cat)\ncase "$e" in *crash*) exit 7;; esac\n',
)
TRIAL = (
    'name = "trial"\nevents = ["PreToolUse"]\nmode = "shadow"\n'
    '[action.shell]\ncommand = "sh run.sh"\ntimeout_secs = 5\n',
    "cat >/dev/null\n",
)
TELEMETRY = (
    'name = "telemetry"\nevents = ["PostToolUse"]\n'
    '[action.shell]\ncommand = "sh run.sh"\ntimeout_secs = 5\n',
    "cat >/dev/null\n",
)


def hooks_folder(root: Path, **hooks: tuple[str, str]) -> Path:
    for name, (manifest, script) in hooks.items():
        (root / name).mkdir(parents=True)
        (root / name / "HOOK.toml").write_text(manifest)
        (root / name / "run.sh").write_text(script)
    return root


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        body: bytes = response.read()
    return body.decode()


def value(text: str, series: str) -> float | None:
    """The sample of ``series`` (name and labels exactly as exposed), or None."""
    match = re.search(rf"^{re.escape(series)} (\S+)$", text, re.M)
    return float(match.group(1)) if match else None


def scraped_when(port: int, condition: Any, what: str) -> str:
    """Scrape until ``condition(text)`` holds (the endpoint may still be starting)."""
    last: list[str] = [""]

    def attempt() -> bool:
        try:
            last[0] = scrape(port)
        except (urllib.error.URLError, ConnectionError, OSError):
            return False
        return bool(condition(last[0]))

    wait_for(attempt, timeout_s=30, what=what)
    return last[0]


class Fleet:
    def __init__(self, env: dict[str, str], tmp_path: Path) -> None:
        self.env = env
        self.tmp_path = tmp_path
        self.procs: list[tuple[subprocess.Popen[bytes], IO[bytes]]] = []

    def start(self, role: str, port: int, folder: Path, *extra: str) -> Path:
        log = self.tmp_path / f"{role}.log"
        out = log.open("wb")
        cmd = [sys.executable, "-m", "hookbus", "--log-format", "json", "--log-level", "INFO"]
        cmd += ["worker", "--role", role, "--hooks-dir", str(folder), "--metrics-port", str(port)]
        proc = subprocess.Popen(
            [*cmd, *extra], env=self.env, stdin=subprocess.DEVNULL, stdout=out, stderr=out
        )
        self.procs.append((proc, out))
        return log

    def stop(self) -> None:
        for proc, _out in self.procs:
            proc.terminate()
        for proc, out in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            out.close()


@pytest.fixture
def fleet(real_redis_url: str, namespace: str, tmp_path: Path) -> Iterator[tuple[Fleet, HookBus]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env.update(
        HOOKBUS_REDIS_URL=real_redis_url,
        HOOKBUS_NAMESPACE=namespace,
        XDG_RUNTIME_DIR=str(tmp_path),
    )
    fleet = Fleet(env, tmp_path)
    bus = HookBus(Settings(redis_url=real_redis_url, namespace=namespace))
    try:
        yield fleet, bus
    finally:
        bus.close()
        fleet.stop()


def json_lines(log: Path) -> list[dict[str, Any]]:
    lines = []
    for line in log.read_text().splitlines():
        if line.startswith("{"):
            lines.append(json.loads(line))
    return lines


def hook_lines(log: Path) -> list[dict[str, Any]]:
    return [d for d in json_lines(log) if d.get("logger") == "hookbus.workers.fleet.hook_run_log"]


def ask(bus: HookBus, command: str) -> str:
    event = Event(
        kind="PreToolUse",
        session_id="s",
        payload={"tool_name": "Bash", "tool_input": {"command": command}},
    )
    return bus.request(event, deadline_ms=5000).outcome


def test_a_chain_worker_s_metrics_count_what_it_answered(
    fleet: tuple[Fleet, HookBus], real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    workers, bus = fleet
    folder = hooks_folder(tmp_path / "hooks", **{"no-rm-rf": GUARD, "flaky": FLAKY, "trial": TRIAL})
    port = free_port()
    log = workers.start("chain", port, folder)
    keys = Keys.for_namespace(namespace)
    wait_for(lambda: list_workers(real_redis, keys), what="the chain worker's heartbeat")

    outcomes = [ask(bus, c) for c in ("rm -rf /", "ls", "crash", "cat README")]

    assert outcomes == ["deny", "allow", "allow", "allow"]
    text = scraped_when(
        port,
        lambda t: value(t, 'hookbus_requests_total{outcome="allow"}') == 3,
        "three allows in /metrics",
    )
    assert value(text, 'hookbus_requests_total{outcome="deny"}') == 1
    assert value(text, "hookbus_chain_duration_seconds_count") == 4
    # the guard ran on all four; flaky on the three the guard let through; trial on all four
    assert value(text, 'hookbus_hook_duration_seconds_count{hook="no-rm-rf"}') == 4
    assert value(text, 'hookbus_hook_duration_seconds_count{hook="flaky"}') == 3
    assert value(text, 'hookbus_hook_duration_seconds_count{hook="trial"}') == 4
    assert value(text, 'hookbus_hook_errors_total{hook="flaky"}') == 1
    assert value(text, 'hookbus_shadow_runs_total{hook="trial",outcome="continue"}') == 4
    assert value(text, 'hookbus_hook_errors_total{hook="no-rm-rf"}') is None
    assert value(text, "hookbus_redis_up") == 1
    assert value(text, 'hookbus_stream_lag{stream="requests"}') == 0
    assert value(text, "hookbus_dlq_size") == 0
    # answers are acknowledged in bulk (the worker's ack ledger, every 0.1 s)
    scraped_when(
        port,
        lambda t: value(t, 'hookbus_stream_pending{stream="requests"}') == 0,
        "no request left pending in /metrics",
    )
    assert re.search(r'^hookbus_bundle_info\{version="[^"]+"\} 1\.0$', text, re.M)

    lines = wait_for(lambda: len(hook_lines(log)) >= 11 and hook_lines(log), what="hook lines")
    flaky = [d for d in lines if d["hook"] == "flaky" and d["outcome"] == "error"]
    assert len(flaky) == 1
    (line,) = flaky
    assert line["level"] == "INFO" and line["kind"] == "PreToolUse"
    assert line["worker"].startswith("chain")
    assert isinstance(line["duration_ms"], float) and line["request_id"]
    assert "bundle_version" in line and line["error"]
    assert sum(1 for d in lines if d.get("shadow")) == 4


def test_fan_out_and_rq_workers_count_events_and_jobs(
    fleet: tuple[Fleet, HookBus], real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    workers, bus = fleet
    folder = hooks_folder(tmp_path / "hooks", telemetry=TELEMETRY)
    fanout_port, rq_port = free_port(), free_port()
    workers.start("fanout", fanout_port, folder)
    rq_log = workers.start("rq", rq_port, folder, "--isolation", "none")
    keys = Keys.for_namespace(namespace)
    wait_for(lambda: len(list_workers(real_redis, keys)) >= 2, what="two heartbeats")

    for n in range(3):
        bus.publish(Event(kind="PostToolUse", session_id="s", payload={"n": n}))

    fanout = scraped_when(
        fanout_port,
        lambda t: value(t, "hookbus_events_dispatched_total") == 3,
        "three events dispatched",
    )
    assert value(fanout, 'hookbus_fanout_jobs_total{result="enqueued"}') == 3
    assert value(fanout, "hookbus_redis_up") == 1
    assert value(fanout, 'hookbus_stream_lag{stream="events"}') == 0
    rq = scraped_when(
        rq_port,
        lambda t: value(t, 'hookbus_fanout_jobs_total{result="ok"}') == 3,
        "three jobs run",
    )
    assert value(rq, 'hookbus_hook_duration_seconds_count{hook="telemetry"}') == 3
    assert value(rq, 'hookbus_hook_errors_total{hook="telemetry"}') is None
    assert value(rq, "hookbus_dlq_size") == 0

    lines = wait_for(lambda: len(hook_lines(rq_log)) >= 3 and hook_lines(rq_log), what="lines")
    assert {(d["hook"], d["kind"], d["outcome"]) for d in lines} == {
        ("telemetry", "PostToolUse", "continue")
    }
    assert all(d["event_id"] and d["worker"] for d in lines)


def test_a_port_already_taken_is_refused_with_what_to_do(
    fleet: tuple[Fleet, HookBus], tmp_path: Path
) -> None:
    workers, _bus = fleet
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = int(taken.getsockname()[1])
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "hookbus",
                "worker",
                "--role",
                "fanout",
                "--metrics-port",
                str(port),
                "--hooks-dir",
                str(hooks_folder(tmp_path / "h", telemetry=TELEMETRY)),
            ],
            env=workers.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode != 0
    assert done.returncode == 78, done.stderr  # a configuration error
    assert f"metrics port {port}" in done.stderr


def test_the_metrics_endpoint_comes_back_with_a_chain_worker_s_restarted_child(
    fleet: tuple[Fleet, HookBus], real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    workers, bus = fleet
    folder = tmp_path / "hooks"
    (folder / "killer").mkdir(parents=True)
    (folder / "killer" / "HOOK.toml").write_text(
        'name = "killer"\nevents = ["PreToolUse"]\n[action.python]\nentrypoint = "k:run"\n'
    )
    (folder / "killer" / "k.py").write_text(
        "import os\n"
        "def run(event):\n"
        "    if event.payload.get('tool_input', {}).get('command') == 'die':\n"
        "        os._exit(3)\n"
    )
    port = free_port()
    workers.start("chain", port, folder)
    keys = Keys.for_namespace(namespace)
    wait_for(lambda: list_workers(real_redis, keys), what="the chain worker's heartbeat")
    assert ask(bus, "ls") == "allow"
    scraped_when(port, lambda t: value(t, 'hookbus_requests_total{outcome="allow"}') == 1, "1")

    ask(bus, "die")  # kills the serving child (twice: it is run once more, then answered)

    def fresh_child_answers() -> bool:
        return ask(bus, "ls") == "allow"

    wait_for(fresh_child_answers, timeout_s=30, what="a restarted child answering")
    wait_for(
        lambda: any(w.extra.get("crashes") for w in list_workers(real_redis, keys)),
        what="the supervisor's count of its dead child",
    )
    text = scraped_when(
        port,
        lambda t: value(t, 'hookbus_requests_total{outcome="allow"}') is not None,
        "the restarted child's /metrics",
    )
    assert value(text, "hookbus_redis_up") == 1
