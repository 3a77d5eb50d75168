"""A gateway run as the same OS user as the agents it serves keeps its secrets out of their
reach where the kernel can: it marks itself non-dumpable at start, as the workers do, so
``/proc/<gateway>/environ`` (the producer's Redis password, a shared token) and ``mem`` are
unreadable to that user's other processes. The tokens file a same-user agent can read is
docs/security.md's rule (the gateway runs as a user of its own), not something a process
can enforce.

Played for real: the gateway and the prober both run as ``nobody``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gateway_helpers import ROOT, free_port

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
SECRET = "gw-shared-token-7f3a"


@pytest.fixture
def gateway_as_nobody(real_redis_url: str, namespace: str, tmp_path: Path) -> Iterator[int]:
    """``hookbus gateway`` run as ``nobody`` with a shared token in its environment: its pid."""
    if os.geteuid() != 0:
        pytest.fail("this test plays two processes of one unprivileged user: run it as root")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env.update(
        HOOKBUS_REDIS_URL=real_redis_url,
        HOOKBUS_NAMESPACE=namespace,
        HOOKBUS_GATEWAY_TOKEN=SECRET,
        PYTHONPATH=str(ROOT),
        HOME="/nonexistent",
    )
    log = tmp_path / "gateway.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*NOBODY, sys.executable, "-m", "hookbus", "gateway", "--port", str(port)],
            env=env,
            cwd="/",
            stdout=subprocess.DEVNULL,
            stderr=out,
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    said = log.read_text(errors="replace")[-2000:]
                    pytest.fail(f"the gateway did not start as nobody: {said}")
                time.sleep(0.05)
        yield proc.pid
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.parametrize("what", ["environ", "mem"])
def test_another_process_of_the_gateway_s_user_cannot_read_its_secrets(
    gateway_as_nobody: int, what: str
) -> None:
    probe = subprocess.run(
        [*NOBODY, "head", "-c", "65536", f"/proc/{gateway_as_nobody}/{what}"],
        capture_output=True,
        timeout=30,
    )
    assert SECRET.encode() not in probe.stdout
    assert probe.returncode != 0, probe.stdout[:200]
    assert b"Permission denied" in probe.stderr, probe.stderr
