"""`hookbus dev` starts a real server, answers PING at the printed URL, and leaves no process
behind after Ctrl-C (SIGINT) or SIGTERM."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

URL_LINE = re.compile(r"export HOOKBUS_REDIS_URL=(\S+)")
PID_LINE = re.compile(r"pid (\d+)")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); it is gone for our purpose
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in status


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid:
            found.append(int(entry.name))
    return found


def start_dev(tmp_path: Path) -> tuple[subprocess.Popen[str], str, list[int]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env["COLUMNS"] = "200"
    proc = subprocess.Popen(
        [sys.executable, "-m", "hookbus", "dev", "--hooks-dir", str(tmp_path / "hooks")],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if "Press Ctrl-C" in line:
            break
    text = "".join(lines)
    match = URL_LINE.search(text)
    assert match, f"no URL printed:\n{text}"
    pids = [int(p) for p in PID_LINE.findall(text)]
    return proc, match.group(1), pids


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_dev_serves_ping_and_leaves_no_process_after_a_signal(
    tmp_path: Path, sig: signal.Signals
) -> None:
    (tmp_path / "hooks").mkdir()
    proc, url, pids = start_dev(tmp_path)
    try:
        assert redis.Redis.from_url(url).ping()
        children = _children(proc.pid)
        assert pids, "dev printed no pids"
        proc.send_signal(sig)
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()
    assert proc.returncode == 0
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_pid_alive(p) for p in pids + children):
        time.sleep(0.05)
    assert not [p for p in pids + children if _pid_alive(p)]
    with pytest.raises(redis.exceptions.ConnectionError):
        redis.Redis.from_url(url, socket_connect_timeout=0.5).ping()


def test_dev_answers_requests_as_soon_as_it_says_it_is_ready(tmp_path: Path) -> None:
    from hookbus import Event, HookBus
    from hookbus.bus.settings.loader import Settings

    guard = tmp_path / "hooks" / "no-rm"
    guard.mkdir(parents=True)
    (guard / "HOOK.toml").write_text(
        'name = "no-rm"\nevents = ["PreToolUse"]\n'
        '[action.prompt_inject]\ncontent = "checked by no-rm"\n'
    )
    proc, url, _pids = start_dev(tmp_path)
    try:
        with HookBus(Settings(redis_url=url)) as bus:
            decision = bus.request(Event(kind="PreToolUse", payload={}), deadline_ms=2_000)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
        if proc.stdout:
            proc.stdout.close()
    assert decision.degraded is False, decision.reason
    assert decision.context == ["checked by no-rm"]


def test_dev_survives_a_burst_of_ctrl_c_and_still_stops_cleanly(tmp_path: Path) -> None:
    proc, _url, pids = start_dev(tmp_path)
    try:
        for _ in range(5):
            proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()
    assert proc.returncode == 0
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_pid_alive(p) for p in pids):
        time.sleep(0.05)
    assert not [p for p in pids if _pid_alive(p)]


def test_dev_killed_outright_takes_its_server_with_it(tmp_path: Path) -> None:
    proc, _url, _pids = start_dev(tmp_path)
    children = _children(proc.pid)
    proc.kill()
    proc.wait()
    if proc.stdout:
        proc.stdout.close()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_pid_alive(p) for p in children):
        time.sleep(0.05)
    assert not [p for p in children if _pid_alive(p)]
