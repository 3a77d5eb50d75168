"""A second console on a port in use says so and who holds it, before printing a URL that
would reach the other process: exit 69, no login URL, no uvicorn traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_console_on_a_taken_port_names_the_holder_and_exits_69(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
        env.update(PYTHONPATH=str(ROOT), HOOKBUS_CONSOLE_TOKEN="t" * 24)
        out = subprocess.run(
            [sys.executable, "-m", "hookbus", "console", "--port", str(port)],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert out.returncode == 69, out.stdout + out.stderr
    assert f"port {port} is taken by pid {os.getpid()}" in " ".join(out.stderr.split())
    assert "http://" not in out.stdout and "Traceback" not in out.stderr
