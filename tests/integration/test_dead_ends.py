"""No silent dead ends: each command that would do nothing useful says what happened and what
to run instead (a tail that cannot show a blocking kind's requests, a publish that ran no
guard, a status with no chain worker, a worker's start, a hint to paste)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from hookbus.audit.autonomy import AutonomyPolicy
from hookbus.authoring.pending import folder_digest
from hookbus.authoring.write import write_hook
from tests.blocking_helpers import wait_for

ROOT = Path(__file__).resolve().parents[2]


def _env(url: str, ns: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env.update(HOOKBUS_REDIS_URL=url, HOOKBUS_NAMESPACE=ns, PYTHONPATH=str(ROOT))
    return env


def _hookbus(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hookbus", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=30,
    )


class Output:
    """The lines a process writes to one pipe, read on a thread as they come."""

    def __init__(self, pipe: object) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe: object) -> None:
        for line in iter(pipe.readline, ""):  # type: ignore[attr-defined]
            self.lines.append(line.rstrip("\n"))

    def close(self, pipe: object) -> None:
        self._thread.join(timeout=5)
        pipe.close()  # type: ignore[attr-defined]

    def text(self) -> str:
        return "\n".join(self.lines)


def test_tail_of_a_blocking_kind_without_decisions_says_to_add_decisions(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    env = _env(real_redis_url, namespace)
    assert _hookbus(env, "publish", "PreToolUse", cwd=tmp_path).returncode == 0
    out = _hookbus(env, "tail", "--kind", "PreToolUse", "--last", "1", "--count", "1", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "hookbus tail --decisions --kind PreToolUse" in out.stderr
    assert _hookbus(env, "publish", "Stop", cwd=tmp_path).returncode == 0
    observed = _hookbus(env, "tail", "--kind", "Stop", "--last", "1", "--count", "1", cwd=tmp_path)
    assert observed.returncode == 0
    assert "--decisions" not in observed.stderr


def test_publish_of_a_blocking_kind_without_wait_says_no_guard_ran(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    env = _env(real_redis_url, namespace)
    lean = _hookbus(env, "publish", "PreToolUse", "-p", '{"tool_name": "Bash"}', cwd=tmp_path)
    assert lean.returncode == 0, lean.stderr
    assert "no guard ran" in lean.stderr
    assert "hookbus publish PreToolUse --wait" in lean.stderr
    as_json = _hookbus(env, "--json", "publish", "pretooluse", cwd=tmp_path)
    assert json.loads(as_json.stdout)["kind"] == "PreToolUse"
    assert "no guard ran" in as_json.stderr
    observed = _hookbus(env, "publish", "Stop", cwd=tmp_path)
    assert observed.returncode == 0
    assert observed.stderr == ""


def test_status_exits_69_with_the_command_to_start_a_chain_worker_when_none_is_alive(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    env = _env(real_redis_url, namespace)
    for args in (("status",), ("status", "--json")):
        out = _hookbus(env, *args, cwd=tmp_path)
        assert out.returncode == 69, (args, out.stderr)
        assert "no chain worker alive" in out.stderr
        assert namespace in out.stderr
        assert "hookbus worker --role chain" in out.stderr


@pytest.fixture
def worker_without_its_folder(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> Iterator[tuple[subprocess.Popen[str], Output]]:
    """A chain worker told to load a hooks folder that is not there (as a Kubernetes pod
    whose image sets HOOKBUS_HOOKS_DIR and mounts nothing), metrics on a port of its own."""
    env = _env(real_redis_url, namespace)
    env["HOOKBUS_HOOKS_DIR"] = str(tmp_path / "not-mounted")
    proc = subprocess.Popen(
        [sys.executable, "-m", "hookbus", "worker", "--role", "chain", "--metrics-port", "0"],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    err = Output(proc.stderr)
    try:
        wait_for(lambda: "metrics for the chain worker" in err.text(), what="the metrics line")
        wait_for(lambda: "chain worker serving" in err.text(), what="the start-up line")
        yield proc, err
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=15)
        err.close(proc.stderr)


def test_a_worker_says_once_what_it_serves_where_its_metrics_are_and_that_it_is_unsigned(
    worker_without_its_folder: tuple[subprocess.Popen[str], Output], namespace: str
) -> None:
    _, err = worker_without_its_folder
    time.sleep(0.5)  # anything said twice would be said by now
    text = err.text()
    (start,) = [line for line in err.lines if "chain worker serving" in line]
    assert f"namespace '{namespace}'" in start
    assert "redis://" in start
    assert "1 partition" in start
    assert "0 hook(s) loaded" in start
    assert "UNSIGNED" in start
    assert [line for line in err.lines if "metrics for the chain worker on http://" in line]
    assert text.count("UNSIGNED MODE") == 1, text


def test_a_worker_whose_folder_did_not_load_logs_the_policy_s_deny_not_an_allow(
    worker_without_its_folder: tuple[subprocess.Popen[str], Output],
    real_redis_url: str,
    namespace: str,
    tmp_path: Path,
) -> None:
    _, err = worker_without_its_folder
    text = err.text()
    assert "empty chain's answer (allow)" not in text
    assert "answered by the failure policy (degraded)" in text
    shown = _hookbus(_env(real_redis_url, namespace), "status", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr  # a chain worker is alive
    assert "None" not in shown.stdout
    assert "refused its hooks folder" in " ".join(shown.stdout.split())


def test_pasted_hints_carry_the_hooks_folder_they_act_on(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    folder = tmp_path / "my hooks"
    folder.mkdir()
    spec = {
        "name": "no-rm",
        "description": "refuses rm -rf",
        "events": ["PreToolUse"],
        "action": {"command": "true"},
    }
    pending = write_hook(spec, hooks_dir=folder, policy=AutonomyPolicy(), author="agent:a1")
    assert pending.ok, pending.reason
    flag = f"--hooks-dir '{folder.absolute()}'"
    assert f"hookbus hooks approve no-rm {flag}" in pending.reason
    assert f"hookbus hooks approve no-rm {flag}" in str(pending.to_dict()["next_step"])
    approved = subprocess.run(
        [
            *(sys.executable, "-m", "hookbus", "hooks", "approve", "no-rm"),
            *("--hooks-dir", str(folder), "--digest", folder_digest(folder / ".pending" / "no-rm")),
        ],
        env=_env(real_redis_url, namespace),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert approved.returncode == 0, approved.stderr
    assert f"hookbus reload {flag}" in " ".join(approved.stdout.split())


def test_hookbus_dev_says_once_in_its_banner_that_it_runs_unsigned(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env.update(COLUMNS="200", PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "hookbus", "dev", "--hooks-dir", str(ROOT / "examples" / "hooks")],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    out = Output(proc.stdout)
    try:
        wait_for(lambda: "Press Ctrl-C" in out.text(), timeout_s=60, what="dev's banner")
        for role in ("chain", "fanout", "rq"):
            line = f"{role} worker serving"
            wait_for(lambda line=line: line in out.text(), what=f"the {role} worker")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        out.close(proc.stdout)
    text = out.text()
    assert "UNSIGNED MODE" not in text, text
    assert len([line for line in out.lines if "unsigned: bundles are neither" in line]) == 1
    assert text.count("UNSIGNED: no verify key") == 3  # each worker's start-up line says it
