"""examples/supervisor/README.md's walkthrough runs as written: its bash blocks, in order,
from a fresh folder holding a copy of examples/, with ``hookbus dev`` left running as the
walkthrough says. Two things differ from a reader's machine, each so that the test cannot
touch anyone else's: the export line names the test's Redis and namespace, and the tmux
server lives in the test's folder (``TMUX_TMPDIR``); ``HOME`` is the test's too, so the
stub supervisor's logs land under it."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from tests.blocking_helpers import wait_for

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "examples" / "supervisor" / "README.md"
FENCE = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)


def _bash(script: str, *, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_supervisor_walkthrough_runs_as_written(
    tmp_path: Path, real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    text = README.read_text()
    setup, sessions, seen, drive, settings = FENCE.findall(
        text[text.index("## Walkthrough") : text.index("Clean up:")]
    )
    setup = setup.replace("redis://127.0.0.1:6379/0", real_redis_url)
    setup = setup.replace("supervisor-demo", namespace)
    export = next(line for line in setup.splitlines() if line.startswith("export "))
    dev_line = next(line for line in setup.splitlines() if "hookbus dev" in line)
    folder = tmp_path / "repo"
    shutil.copytree(ROOT / "examples", folder / "examples")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HOOKBUS_", "TMUX"))}
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        HOME=str(tmp_path),
        TMUX_TMPDIR=str(tmp_path),
        COLUMNS="200",
    )
    first = _bash(setup.replace(dev_line, ""), cwd=folder, env=env)
    assert first.returncode == 0, first.stderr
    assert "warden" in first.stdout and "forge" in first.stdout
    dev = subprocess.Popen(
        ["bash", "-c", f"{export}\n{dev_line}"],
        cwd=folder,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert dev.stdout is not None
        banner = ""
        while "Press Ctrl-C" not in banner:
            line = dev.stdout.readline()
            assert line, f"hookbus dev ended:\n{banner}"
            banner += line
        started = _bash(f"{export}\n{sessions}", cwd=folder, env=env)
        assert started.returncode == 0, started.stderr
        logs = tmp_path / ".cache" / "hookbus-supervisors"
        forge = logs / "c3d4e5f6-0000-4000-8000-000000000003.log"
        warden = logs / "a1b2c3d4-0000-4000-8000-000000000001.log"
        wait_for(lambda: forge.exists() and warden.exists(), 60, "both supervisors' logs")
        answer = "Summarise what you did in NOTES.md, then continue with the next task."
        wait_for(
            lambda: answer in _bash(seen.split("\n\n")[-1], cwd=folder, env=env).stdout,
            60,
            "warden's pane to print its supervisor's answer",
        )
        shown = _bash(f"{export}\n{seen}", cwd=folder, env=env)
        assert shown.returncode == 0, shown.stderr
        assert sorted(p.name for p in logs.iterdir()) == sorted([forge.name, warden.name])
        message = forge.read_text()
        for section in ("[SESSION IDENTITY]", "agent_id: forge", "tmux_session_name: forge-main"):
            assert section in message
        assert "hookbus tmux forge-main choose <n>" in message
        driven = _bash(f"{export}\nset -e\n{drive}", cwd=folder, env=env)
        assert driven.returncode == 0, driven.stderr
        lines = [line for line in settings.splitlines() if line.strip()]
        for line in lines:
            done = _bash(f"{export}\n{line}", cwd=folder, env=env)
            refused = "refused" in line
            assert (done.returncode != 0) == refused, (line, done.stdout, done.stderr)
        assert (folder / "registry-backup.json").exists()
    finally:
        _bash("tmux kill-server", cwd=folder, env=env)
        dev.send_signal(signal.SIGINT)
        dev.wait(timeout=30)
        if dev.stdout is not None:
            dev.stdout.close()
