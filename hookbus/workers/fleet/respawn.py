"""A worker that restarts itself when a hook kills its process (chain and RQ roles).

A python hook runs inside the worker process, so one that calls ``os._exit`` or crashes the
interpreter (a segfault in a C extension) ends the process with it. ``run_chain_worker``
and ``run_rq_worker`` therefore serve from a forked child and stay behind as its
supervisor: when the child
dies (any exit but a clean stop), the supervisor logs it, counts it, gives up the dead
child's lease and heartbeat at once (so the reclaimer of a live worker takes its requests
over within a pass or two), and forks a fresh child, backing off when children keep dying
young. The reclaimer runs a taken-over request once more and then answers it by policy and
dead-letters it (see :mod:`~hookbus.workers.chain.reclaimer`), so a request that kills workers
costs two restarts, not the fleet; an RQ job whose hook kills its worker is found abandoned
and retried, then dead-lettered, by RQ (see :mod:`~hookbus.workers.fanout.rq_worker`).

The supervisor is the process the operator started: its pid is the one heartbeats report
(the child's is ``worker_pid``), SIGTERM to it is passed on to the child for a graceful
stop, and the child dies with it (PR_SET_PDEATHSIG). It forks only from a process whose
main thread is the only thread (the CLI's ``hookbus worker``), never inside a program that
embeds a worker on a thread of its own.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

import redis

from hookbus.bus import keys
from hookbus.bus.connection import CONNECTION_ERRORS, bus_client
from hookbus.bus.embedded import set_parent_death_signal
from hookbus.workers.fleet.heartbeat import new_worker_id

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings

log = logging.getLogger(__name__)

_REDIS_ERRORS: tuple[type[BaseException], ...] = (*CONNECTION_ERRORS, redis.exceptions.RedisError)

#: A child that lived at least this long resets the restart backoff, in seconds.
HEALTHY_RUN_S = 10.0
#: Longest wait before restarting a child that keeps dying young, in seconds.
MAX_BACKOFF_S = 5.0
#: How long a stopping child may take before it is killed, in seconds.
STOP_TIMEOUT_S = 30.0
#: Longest fatal error message a child hands its supervisor, in bytes (one pipe write).
FATAL_MAX_BYTES = 4000


def can_supervise() -> bool:
    """True when forking is safe here: a POSIX process whose only thread is the main one."""
    return (
        hasattr(os, "fork")
        and threading.current_thread() is threading.main_thread()
        and threading.active_count() == 1
    )


#: What a child tells its supervisor through the pipe: it stopped cleanly, or gave up.
_CLEAN = "clean"
_FATAL = "fatal:"


def _read_all(fd: int) -> str:
    """What the (exited) child wrote to its fatal-error pipe."""
    os.set_blocking(fd, False)  # the child's own children may still hold the write end
    chunks: list[bytes] = []
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(fd, 4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def describe_exit(code: int) -> str:
    """``killed by SIGSEGV`` / ``exit code 3`` from a waitstatus exit code."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class Respawner:
    """Forks the serving child, waits for it, restarts it when it dies (see module doc)."""

    def __init__(
        self,
        settings: Settings,
        stop_event: threading.Event,
        *,
        role: str = "chain",
        on_death: Callable[[redis.Redis, str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.stop_event = stop_event
        self.role = role
        #: what the role gives up for a child it saw die (``client``, the child's worker
        #: id), beyond its heartbeat entry: a chain worker's lease and reader slots
        self.on_death = on_death
        self.supervisor_pid = os.getpid()
        self.crashes = 0
        self.last_crash: str | None = None

    def info(self) -> dict[str, Any]:
        """Heartbeat fields of the child: the supervisor's pid, the crash count."""
        return {
            "pid": self.supervisor_pid,
            "worker_pid": os.getpid(),
            "crashes": self.crashes,
            "last_crash": self.last_crash,
        }

    def run(self, serve: Callable[[str], None]) -> None:
        """Run ``serve(worker_id)`` in forked children until a clean stop."""
        backoff = 0.0
        while not self.stop_event.is_set():
            worker_id = new_worker_id(self.role)
            started = time.monotonic()
            sys.stdout.flush()
            sys.stderr.flush()
            fatal_r, fatal_w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(fatal_r)
                self._child(serve, worker_id, fatal_w)
            os.close(fatal_w)
            try:
                code = self._wait(pid)
                said = _read_all(fatal_r)
            finally:
                os.close(fatal_r)
            if said.startswith(_FATAL):
                # Redis errors the child's own retries gave up on (unreachable at start): as
                # without a supervisor, the role ends with them instead of looping
                raise redis.exceptions.ConnectionError(said.removeprefix(_FATAL))
            if self.stop_event.is_set() or (code == 0 and said == _CLEAN):
                return  # an exit 0 without the clean mark is a hook's os._exit(0): a crash
            self.crashes += 1
            self.last_crash = f"{describe_exit(code)} (worker {worker_id})"
            log.error(
                "%s worker process %d died: %s; restarting it (%d crash(es) so far)",
                self.role,
                pid,
                describe_exit(code),
                self.crashes,
            )
            self._release(worker_id)
            young = time.monotonic() - started < HEALTHY_RUN_S
            backoff = min(max(backoff * 2, 0.1), MAX_BACKOFF_S) if young else 0.0
            if backoff:
                self.stop_event.wait(backoff)

    def _child(self, serve: Callable[[str], None], worker_id: str, fatal_fd: int) -> NoReturn:
        code = 0
        try:
            set_parent_death_signal(signal.SIGKILL)
            if os.getppid() != self.supervisor_pid:  # the supervisor died meanwhile
                code = 1
            else:
                serve(worker_id)
                with contextlib.suppress(OSError):
                    os.write(fatal_fd, _CLEAN.encode())
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except _REDIS_ERRORS as exc:
            with contextlib.suppress(OSError):
                reason = str(exc) or type(exc).__name__
                os.write(fatal_fd, (_FATAL + reason).encode()[:FATAL_MAX_BYTES])
            code = 1
        except BaseException:
            log.exception("%s worker %s failed", self.role, worker_id)
            code = 1
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)

    def _wait(self, pid: int) -> int:
        """Wait for the child; on a stop request pass SIGTERM on (then SIGKILL if it hangs)."""
        forwarded_at: float | None = None
        parent = os.getppid()
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
            if self.stop_event.is_set():
                now = time.monotonic()
                if os.getppid() != parent and forwarded_at != float("inf"):
                    # asked to stop because whoever started us died (`hookbus dev` killed
                    # outright): nobody waits for a graceful stop, leave nothing behind
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                    forwarded_at = float("inf")
                elif forwarded_at is None:
                    forwarded_at = now
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGTERM)
                elif now - forwarded_at > STOP_TIMEOUT_S:
                    log.error("%s worker process %d did not stop; killing it", self.role, pid)
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                    forwarded_at = float("inf")
                time.sleep(0.05)
            else:
                self.stop_event.wait(0.05)  # a death is noticed (and announced) at once

    def _release(self, worker_id: str) -> None:
        """Give up a dead child's heartbeat entry and what ``on_death`` releases (else its
        lease) now, not when they expire."""
        try:
            client = bus_client(self.settings)
        except _REDIS_ERRORS as exc:
            log.warning("dead worker %s's lease not released: %s", worker_id, exc)
            return
        try:
            ns = self.settings.namespace
            if self.on_death is not None:
                self.on_death(client, worker_id)
            else:
                client.delete(keys.worker_lease(ns, worker_id))
            client.hdel(keys.workers(ns), worker_id)
        except _REDIS_ERRORS as exc:
            log.warning("dead worker %s's lease not released: %s", worker_id, exc)
        finally:
            client.close()
