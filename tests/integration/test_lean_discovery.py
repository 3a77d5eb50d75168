"""Every entry point finds a running ``hookbus dev`` the same way: the README's Python
snippet run in the dev's folder (or below it) reaches the dev fleet, and an agent-CLI hook
started in an unrelated folder finds it through the per-user pointer. Nothing is read from
or written to the real home: HOME and the XDG folders are the test's."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import redis

from hookbus.bus import keys
from tests.lean_helpers import (
    ROOT,
    hookbus_dev,
    pre_tool_use,
    private_env,
    readme_python_example,
    run_hook,
    wait_for,
)


def test_the_readme_snippet_and_a_hook_anywhere_reach_the_running_dev(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    shutil.copytree(ROOT / "examples" / "hooks", project / "hooks")
    (project / "src").mkdir()
    elsewhere.mkdir()
    env = private_env(tmp_path / "home")
    assert not any(k.startswith("HOOKBUS_") for k in env)
    dev_args = ("--redis-url", real_redis_url, "-n", namespace, "dev", "--hooks-dir", "hooks")
    with hookbus_dev(project, env, *dev_args):
        wait_for(lambda: real_redis.hlen(keys.workers(namespace)) > 0, what="the dev's workers")
        pointer = tmp_path / "home" / "run" / "hookbus" / "current.json"
        assert json.loads(pointer.read_text())["state"].endswith(".json")

        # the README's snippet, as written, from a folder below the dev's
        out = subprocess.run(
            [sys.executable, "-c", readme_python_example()],
            env=env,
            cwd=project / "src",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines()[0] == "deny False", out.stdout
        assert real_redis.xlen(keys.events(namespace)) == 1

        # an agent-CLI hook in a folder that has nothing to do with the project
        code, answer, err = run_hook(pre_tool_use("rm -rf /"), env, cwd=elsewhere)
        assert code == 0, err
        reason = answer["hookSpecificOutput"]["permissionDecisionReason"]
        assert answer["hookSpecificOutput"]["permissionDecision"] == "deny"
        assert "destructive command" in reason and "unavailable" not in reason, reason

        # config show names every source with its full text, narrow terminal and piped
        state = json.loads(pointer.read_text())["state"]
        shown = subprocess.run(
            [str(Path(sys.executable).with_name("hookbus")), "config", "show"],
            env={**env, "COLUMNS": "60"},
            cwd=project / "src",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert shown.returncode == 0, shown.stderr
        lines = shown.stdout.splitlines()
        assert f'redis_url = "{real_redis_url}"  # dev:{state}' in lines
        assert f'namespace = "{namespace}"  # dev:{state}' in lines
        assert f"# running hookbus dev: {state}" in lines
    # the dev stopped: its file says so, and the pointer still names it
    assert json.loads(Path(state).read_text())["stopped"] is True
    assert json.loads(pointer.read_text())["state"] == state


def test_once_the_dev_stops_no_entry_point_falls_through_to_the_default_redis(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    shutil.copytree(ROOT / "examples" / "hooks", project / "hooks")
    elsewhere.mkdir()
    env = private_env(tmp_path / "home")
    dev_args = ("--redis-url", real_redis_url, "-n", namespace, "dev", "--hooks-dir", "hooks")
    with hookbus_dev(project, env, *dev_args):
        wait_for(lambda: real_redis.hlen(keys.workers(namespace)) > 0, what="the dev's workers")
    hookbus = str(Path(sys.executable).with_name("hookbus"))

    # the guard hook, from any folder: a deny whose reason names the stopped dev
    code, answer, err = run_hook(pre_tool_use("ls"), env, cwd=elsewhere)
    assert code == 0, err
    output = answer["hookSpecificOutput"]
    assert output["permissionDecision"] == "deny"
    assert "has stopped" in output["permissionDecisionReason"], output
    assert str(project.resolve()) in output["permissionDecisionReason"]

    # status and the SDK say so too, instead of reaching 127.0.0.1:6379, namespace default
    status = subprocess.run(
        [hookbus, "status"], env=env, cwd=project, capture_output=True, text=True, timeout=60
    )
    assert status.returncode == 78, status.stdout + status.stderr
    assert "has stopped" in status.stderr and "hookbus dev" in status.stderr
    sdk = subprocess.run(
        [sys.executable, "-c", "from hookbus import HookBus; HookBus.from_url()"],
        env=env,
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert sdk.returncode != 0 and "has stopped" in sdk.stderr, sdk.stderr

    # a Redis named outright (here a variable) outranks the stopped dev
    named = {**env, "HOOKBUS_REDIS_URL": real_redis_url, "HOOKBUS_NAMESPACE": namespace}
    status = subprocess.run(
        [hookbus, "status"], env=named, cwd=project, capture_output=True, text=True, timeout=60
    )
    assert "has stopped" not in status.stdout + status.stderr
