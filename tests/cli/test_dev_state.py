"""``hookbus dev`` tells the other commands run in its folder where its Redis and hooks are,
through a state file that lives as long as it does."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from hookbus.bus import keys

HOOKBUS = str(Path(sys.executable).with_name("hookbus"))
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "hooks"


def env_for(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    runtime = tmp_path / "run"
    runtime.mkdir(exist_ok=True)
    env["XDG_RUNTIME_DIR"] = str(runtime)  # keep the state file out of the real home
    env["COLUMNS"] = "200"
    return env


def hookbus(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [HOOKBUS, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=60
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    shutil.copytree(EXAMPLES / "block-destructive", folder / "my-hooks" / "block-destructive")
    return folder


@pytest.fixture
def dev(
    project: Path, tmp_path: Path, real_redis: redis.Redis, real_redis_url: str, namespace: str
) -> Iterator[subprocess.Popen[str]]:
    env = env_for(tmp_path)
    args = ["--redis-url", real_redis_url, "-n", namespace, "dev", "--no-workers", "-d", "my-hooks"]
    proc = subprocess.Popen(
        [HOOKBUS, *args], cwd=project, env=env, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if "Press Ctrl-C" in line:
                break
        assert any("other hookbus commands run in this folder use it" in x for x in lines), lines
        yield proc
    finally:  # a failed start must not leave the dev running either
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)
        proc.stdout.close()


@pytest.mark.integration
def test_commands_in_the_folder_use_the_running_dev_and_stop_when_it_stops(
    dev: subprocess.Popen[str],
    project: Path,
    tmp_path: Path,
    real_redis: redis.Redis,
    real_redis_url: str,
    namespace: str,
) -> None:
    env = env_for(tmp_path)
    shown = hookbus("config", "show", "--json", cwd=project / "my-hooks", env=env)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["settings"]["redis_url"] == real_redis_url
    assert data["settings"]["namespace"] == namespace
    assert data["settings"]["hooks_dir"] == str(project / "my-hooks")
    [state_file] = (tmp_path / "run" / "hookbus").glob("dev-project-*.json")
    assert data["sources"]["redis_url"] == f"dev:{state_file}"

    published = hookbus("publish", "Stop", cwd=project, env=env)  # the lean path
    assert published.returncode == 0, published.stderr
    assert real_redis.xlen(keys.events(namespace)) == 1
    listed = hookbus("hooks", "list", "--json", cwd=project, env=env)
    assert listed.returncode == 0, listed.stderr
    assert "block-destructive" in listed.stdout

    again = hookbus("dev", "--no-workers", cwd=project, env=env)
    assert again.returncode == 1
    assert "hookbus dev is already running for this folder" in again.stderr

    dev.send_signal(signal.SIGINT)
    dev.wait(timeout=30)
    assert json.loads(state_file.read_text())["stopped"] is True
    after = hookbus("config", "show", "--json", cwd=project, env=env)
    assert after.returncode == 78, after.stdout
    assert "has stopped" in after.stderr and str(state_file) in after.stderr


def test_a_configured_value_wins_over_the_running_dev(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    state = tmp_path / "state.json"
    state.write_text(
        json.dumps({"redis_url": "redis://dev:1/0", "namespace": "devns", "pid": os.getpid()})
    )
    env["HOOKBUS_DEV_STATE"] = str(state)
    env["HOOKBUS_NAMESPACE"] = "mine"
    data = json.loads(hookbus("config", "show", "--json", cwd=tmp_path, env=env).stdout)
    assert data["settings"]["redis_url"] == "redis://dev:1/0"
    assert data["settings"]["namespace"] == "mine"
    assert data["sources"]["namespace"] == "env:HOOKBUS_NAMESPACE"


def test_a_state_file_whose_dev_was_killed_is_an_error_that_says_so(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"redis_url": "redis://dev:1/0", "pid": int(dead)}))
    env["HOOKBUS_DEV_STATE"] = str(state)
    time.sleep(0.05)
    shown = hookbus("config", "show", "--json", cwd=tmp_path, env=env)
    assert shown.returncode == 78 and "has stopped" in shown.stderr, shown.stderr
    # a Redis named outright outranks the stopped dev
    env["HOOKBUS_REDIS_URL"] = "redis://mine:1/0"
    data = json.loads(hookbus("config", "show", "--json", cwd=tmp_path, env=env).stdout)
    assert data["settings"]["redis_url"] == "redis://mine:1/0"


def test_a_stopped_dev_refuses_what_reaches_redis_but_not_what_reads_files(
    tmp_path: Path,
) -> None:
    env = env_for(tmp_path)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"redis_url": "redis://dev:1/0", "pid": int(dead)}))
    env["HOOKBUS_DEV_STATE"] = str(state)
    shutil.copytree(EXAMPLES / "block-destructive", tmp_path / "hooks" / "block-destructive")
    checked = hookbus("hooks", "validate", "hooks", cwd=tmp_path, env=env)
    assert checked.returncode == 0, checked.stderr
    assert "1 hook(s) valid" in checked.stdout
    created = hookbus("hooks", "create", "guard", "--event", "PreToolUse", cwd=tmp_path, env=env)
    assert created.returncode == 0, created.stderr
    assert (tmp_path / "hooks" / "guard" / "HOOK.toml").is_file()
    status = hookbus("status", cwd=tmp_path, env=env)
    assert status.returncode == 78 and "has stopped" in status.stderr, status.stderr
