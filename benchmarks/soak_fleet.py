"""The processes of a soak run: its own redis-server and the hookbus worker fleet.

Every process is started with PR_SET_PDEATHSIG (it dies with the harness even when the
harness is SIGKILLed) and :meth:`Fleet.stop_all` ends each one (SIGCONT first, since a
stopped process cannot act on SIGTERM, then SIGTERM, then SIGKILL). The harness is the
fleet's supervisor: a worker that exits when no fault asked for it is counted as an
unexpected exit and restarted, as systemd or Kubernetes would.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import redis

from hookbus.bus.embedded import die_with_parent

#: How long a started redis-server gets to answer PING, in seconds.
REDIS_START_TIMEOUT_S = 10.0
#: How long a process gets after SIGTERM before SIGKILL, in seconds.
STOP_TIMEOUT_S = 8.0
#: Most restarts of one worker slot (a crash loop must not spin forever).
MAX_RESTARTS = 200


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def rss_kb(pid: int | None) -> int | None:
    """Resident set size of a live process in KiB (None when it is gone)."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as fh:
                found += [int(c) for c in fh.read().split()]
    except (OSError, ValueError):
        pass
    return found


def tree_rss_kb(pid: int | None, depth: int = 3) -> int | None:
    """RSS of a process plus its children's, ``depth`` levels down (a chain worker serves
    from a forked child; an RQ worker may run RQ's scheduler or work horses as children).
    Pages a fork shares with its parent count in both: an upper bound, fine for a trend."""
    own = rss_kb(pid)
    if own is None or pid is None or depth <= 0:
        return own
    return own + sum(tree_rss_kb(child, depth - 1) or 0 for child in _children(pid))


def _end(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGCONT, SIGTERM, wait, SIGKILL: end one process we started, whatever its state."""
    if proc is None or proc.poll() is not None:
        return
    for sig in (signal.SIGCONT, signal.SIGTERM):
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
    try:
        proc.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait(5)


class RedisServer:
    """A redis-server with AOF on, on a free loopback port, in the run's folder."""

    def __init__(self, folder: Path, binary: str = "redis-server") -> None:
        self.folder = folder
        self.binary = binary
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        self.stopped = False  # SIGSTOPped by a fault

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        args = [
            self.binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.folder),
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--save", "",
            "--logfile", str(self.folder / "redis.log"),
            # the disk-full fault moves the RDB folder (CONFIG SET dir) to fail a save
            "--enable-protected-configs", "yes",
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, preexec_fn=die_with_parent
        )
        client = redis.Redis.from_url(self.url, socket_timeout=1, protocol=2)
        deadline = time.monotonic() + REDIS_START_TIMEOUT_S
        try:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"redis-server exited; see {self.folder / 'redis.log'}")
                with contextlib.suppress(redis.exceptions.RedisError, OSError):
                    if client.ping():
                        return
                time.sleep(0.05)
        finally:
            client.close()
        raise RuntimeError(f"redis-server on port {self.port} did not answer PING in time")

    def restart(self) -> float:
        """Graceful stop (SIGTERM: AOF flushed) then start on the same port; seconds down."""
        began = time.monotonic()
        self.resume()
        _end(self.proc)
        self.start()
        return time.monotonic() - began

    def wipe(self) -> float:
        """Kill it, remove everything it kept (AOF, RDB) and start it empty on the same port,
        as a Redis that keeps nothing comes back; seconds down."""
        began = time.monotonic()
        self.resume()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        for kept in ("appendonlydir", "appendonly.aof", "dump.rdb"):
            path = self.folder / kept
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        self.start()
        return time.monotonic() - began

    def pause(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGSTOP)
            self.stopped = True

    def resume(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
        self.stopped = False

    def stop(self) -> None:
        self.resume()
        _end(self.proc)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None


@dataclass
class Slot:
    """One worker process of the fleet, across its restarts."""

    name: str
    role: str
    proc: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = None
    held: bool = False  # a fault stopped or killed it on purpose: don't restart it
    first_pid: int | None = None
    rss_start_kb: int | None = None
    restarts: int = 0
    unexpected_exits: list[dict[str, Any]] = field(default_factory=list)


class Fleet:
    """2 chain workers, a fan-out dispatcher and 2 RQ workers (names chain-1, fanout-1, ...)."""

    def __init__(self, url: str, namespace: str, hooks_dir: Path, run_dir: Path, t0: float) -> None:
        self.url = url
        self.namespace = namespace
        self.hooks_dir = hooks_dir
        self.run_dir = run_dir
        self.t0 = t0
        self.slots: dict[str, Slot] = {}
        self.env = worker_env(url, namespace, run_dir)
        #: Slots run with a wall clock shifted by the seconds in a file: name -> file.
        self.clock_slots: dict[str, str] = {}
        #: Slots run with more in their environment than the others: name -> variables.
        self.slot_env: dict[str, dict[str, str]] = {}

    def add(self, role: str, count: int) -> None:
        for i in range(1, count + 1):
            name = f"{role}-{i}"
            self.slots[name] = Slot(name=name, role=role)

    def spawn(self, name: str) -> None:
        slot = self.slots[name]
        if slot.log is None:
            slot.log = open(self.run_dir / "logs" / f"{name}.log", "ab")  # noqa: SIM115
        slot.log.write(f"--- soak: start at t={time.monotonic() - self.t0:.2f}s\n".encode())
        slot.log.flush()
        args = [sys.executable, "-m", "hookbus", "worker", "--role", slot.role]
        if name in self.clock_slots:  # its wall clock follows a file (soak_clock.py)
            args[1:3] = [str(Path(__file__).with_name("soak_clock.py")), self.clock_slots[name]]
        args += ["--hooks-dir", str(self.hooks_dir)]
        slot.proc = subprocess.Popen(
            args,
            env={**self.env, **self.slot_env.get(name, {})},
            cwd=self.run_dir,
            stdin=subprocess.DEVNULL,
            stdout=slot.log,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,
        )
        if slot.first_pid is None:
            slot.first_pid = slot.proc.pid
        slot.held = False

    def start_all(self) -> None:
        for name in self.slots:
            self.spawn(name)

    def pid(self, name: str) -> int | None:
        proc = self.slots[name].proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def signal(self, name: str, sig: signal.Signals, *, hold: bool) -> None:
        """Send ``sig`` to the slot's whole process group (each worker leads its own: the
        chain worker serves from a forked child, an RQ worker may have children, and a
        SIGSTOP or SIGKILL of the parent alone would leave them running); ``hold`` keeps
        the supervisor off it."""
        slot = self.slots[name]
        slot.held = hold
        if slot.proc is not None and slot.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(slot.proc.pid, sig)
        if sig == signal.SIGKILL and slot.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                slot.proc.wait(5)

    def restart(self, name: str) -> None:
        self.slots[name].restarts += 1
        self.spawn(name)

    def supervise(self) -> list[str]:
        """Restart every worker that exited on its own; return a line for each."""
        news = []
        for slot in self.slots.values():
            if slot.held or slot.proc is None:
                continue
            code = slot.proc.poll()
            if code is None:
                continue
            at = round(time.monotonic() - self.t0, 2)
            slot.unexpected_exits.append({"t": at, "code": code})
            if slot.restarts >= MAX_RESTARTS:
                slot.held = True
                news.append(f"{slot.name} exited with code {code}; restart budget spent")
                continue
            self.restart(slot.name)
            news.append(f"{slot.name} exited with code {code} at t={at}s; restarted")
        return news

    def note_rss_start(self) -> None:
        for slot in self.slots.values():
            slot.rss_start_kb = tree_rss_kb(self.pid(slot.name))

    def stop_all(self) -> None:
        for slot in self.slots.values():
            slot.held = True
            if slot.proc is not None and slot.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    slot.proc.send_signal(signal.SIGCONT)
                    slot.proc.send_signal(signal.SIGTERM)
        for slot in self.slots.values():
            _end(slot.proc)
            if slot.log is not None:
                slot.log.close()
                slot.log = None


def worker_env(url: str, namespace: str, run_dir: Path) -> dict[str, str]:
    """The environment of every hookbus process of the run: no HOOKBUS_* from outside."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env.update(
        HOOKBUS_REDIS_URL=url,
        HOOKBUS_NAMESPACE=namespace,
        HOOKBUS_RELOAD__DATA_DIR=str(run_dir / "worker-data"),
        HOOKBUS_LOG_LEVEL="INFO",
        PYTHONUNBUFFERED="1",
    )
    return env


def spawn(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[bytes]:
    """A helper process (producer, reload command) that dies with the harness."""
    return subprocess.Popen(
        args, env=env, cwd=cwd, stdin=subprocess.DEVNULL, preexec_fn=die_with_parent
    )


def end_process(proc: subprocess.Popen[bytes] | None) -> None:
    """End one process the harness started (producers, reload commands)."""
    _end(proc)


def run_reload(
    hooks_dir: Path,
    env: dict[str, str],
    run_dir: Path,
    log_name: str,
    procs: list[subprocess.Popen[bytes]],
) -> Generator[float, None, int | None]:
    """``hookbus reload --dir HOOKS --wait 10`` with ``env``, logged to ``logs/LOG_NAME``,
    as a fault's steps (it yields the seconds to sleep between polls); at most 30 s, then
    ended. Returns its exit code."""
    with open(run_dir / "logs" / log_name, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hookbus", "reload", "--dir", str(hooks_dir), "--wait", "10"],
            env=env,
            cwd=run_dir,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,
        )
        procs.append(proc)
        started = time.monotonic()
        while proc.poll() is None and time.monotonic() - started < 30:
            yield 0.1
        end_process(proc)
    return proc.returncode
