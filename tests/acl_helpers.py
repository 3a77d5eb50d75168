"""A private ``redis-server`` started with the shipped ``deploy/redis/users.acl``, and
clients of its users: what the ACL and producer-credential tests share."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from hookbus.bus.embedded import free_port

ROOT = Path(__file__).resolve().parents[1]
ACL_FILE = ROOT / "deploy" / "redis" / "users.acl"
#: The namespace the shipped file is written for.
NS = "default"
PASSWORDS = {
    "hookbus-producer": "change-me-producer",
    "hookbus-worker": "change-me-worker",
    "hookbus-operator": "change-me-operator",
}


@dataclass
class AclServer:
    """A running private server: its port, process and log file."""

    port: int
    proc: subprocess.Popen[bytes]
    log_file: Path
    args: list[str]

    def restart_empty(self) -> None:
        """Stop the server and start it again on the same port, holding nothing (it keeps
        nothing on disk): what a host's default Redis does on a restart."""
        self.proc.terminate()
        self.proc.wait(5)
        self.proc = _spawn(self.args, self.log_file)
        _wait_up(self.proc, self.port, self.log_file)

    def client(self, user: str) -> redis.Redis:
        return client(self.port, user)

    def url(self, user: str) -> str:
        return url(self.port, user)


def client(port: int, user: str) -> redis.Redis:
    return redis.Redis(port=port, username=user, password=PASSWORDS[user], protocol=2)


def url(port: int, user: str) -> str:
    return f"redis://{user}:{PASSWORDS[user]}@127.0.0.1:{port}/0"


@contextlib.contextmanager
def acl_redis(workdir: Path, *extra: str) -> Iterator[AclServer]:
    """``redis-server`` on a free port with the shipped ACL file; stopped on exit (and
    continued first, should a test have left it SIGSTOPped)."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed; the ACL tests need the real server")
    port = free_port()
    log_file = workdir / "redis.log"
    args = [
        binary,
        *("--port", str(port), "--bind", "127.0.0.1", "--aclfile", str(ACL_FILE)),
        *("--save", "", "--appendonly", "no", "--dir", str(workdir)),
        *extra,
    ]
    server = AclServer(port, _spawn(args, log_file), log_file, args)
    try:
        _wait_up(server.proc, port, log_file)
        yield server
    finally:
        if sys.platform != "win32":
            with contextlib.suppress(ProcessLookupError):
                server.proc.send_signal(18)  # SIGCONT
        server.proc.terminate()
        server.proc.wait(5)


def _spawn(args: list[str], log_file: Path) -> subprocess.Popen[bytes]:
    with log_file.open("ab") as log_out:
        return subprocess.Popen(args, stdout=log_out, stderr=subprocess.STDOUT)


def _wait_up(proc: subprocess.Popen[bytes], port: int, log_file: Path) -> None:
    deadline = time.monotonic() + 5
    while True:
        if proc.poll() is not None:
            pytest.fail(f"redis-server refused {ACL_FILE}:\n{log_file.read_text()}")
        try:
            with redis.Redis(port=port, protocol=2) as probe:
                probe.ping()
        except redis.exceptions.AuthenticationError:
            return  # up, and the default user is off
        except redis.exceptions.ConnectionError:
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)
        else:
            pytest.fail("the default user answered without a password")
