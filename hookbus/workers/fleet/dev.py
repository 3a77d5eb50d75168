"""The processes behind `hookbus dev`: the whole bus on one machine.

It starts an embedded Redis-compatible server when no Redis URL is configured, pushes the
hooks folder as the first bundle, and runs one process per worker role (chain, fan-out, RQ),
each a plain ``hookbus worker --role ...`` child. Ctrl-C or SIGTERM stops the workers
gracefully, then the server; the children also die with this process if it is killed
(PR_SET_PDEATHSIG), so nothing is left behind.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from hookbus.bundles import signing
from hookbus.bus.connection import ping
from hookbus.bus.embedded import EmbeddedServer, die_with_parent
from hookbus.bus.settings.loader import Settings

if TYPE_CHECKING:
    from hookbus.bundles.store import PushResult

log = logging.getLogger(__name__)

#: ``release(client, settings, hooks_dir, who=...)``: how `hookbus dev` pushes its folder.
Release = Callable[..., "PushResult"]

#: Worker roles `hookbus dev` runs, with the module that implements each.
ROLE_MODULES = {
    "chain": "hookbus.workers.chain.worker",
    "fanout": "hookbus.workers.fanout.role",
    "rq": "hookbus.workers.fanout.rq_worker",
}
#: How long workers get to finish in-flight work after SIGTERM, in seconds.
WORKER_STOP_TIMEOUT_S = 10.0
#: How long `hookbus dev` waits for its workers' first heartbeats before saying it is ready.
WORKER_READY_TIMEOUT_S = 20.0
#: A worker that exits is restarted at most this many times.
MAX_RESTARTS = 5


@dataclass
class DevStack:
    """The processes of a dev session; :meth:`start` and :meth:`stop` are idempotent."""

    settings: Settings
    hooks_dir: Path | None
    roles: tuple[str, ...] = ("chain", "fanout", "rq")
    unix_socket: bool = False
    server: EmbeddedServer | None = None
    url: str = ""
    workers: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    restarts: dict[str, int] = field(default_factory=dict)
    bundle_version: str | None = None
    #: Validates, audits and pushes the hooks folder (``hookbus.authoring.release``). Passed
    #: in by the CLI because workers sit below authoring; None starts without pushing.
    release: Release | None = None

    def start(self) -> str:
        """Start the server (when needed), push the hooks, start the workers; return the URL."""
        if self.settings.redis_url:
            self.url = self.settings.redis_url
            ping(self.url, budget_s=2.0)
        else:
            self.server = EmbeddedServer(unix_socket=self.unix_socket)
            self.url = self.server.start()
        self._push_hooks()
        for role in self.roles:
            if importlib.util.find_spec(ROLE_MODULES[role]) is None:
                log.warning("worker role %s is not available in this build; skipped", role)
                continue
            self.workers[role] = self._spawn(role)
        self._wait_for_heartbeats()
        return self.url

    def _wait_for_heartbeats(self) -> None:
        """Return once every worker heartbeats: until then a request would find "no chain
        worker alive" and get the policy's answer, so `dev` must not say it is ready."""
        if not self.workers:
            return
        from hookbus.bus.connection import connect
        from hookbus.bus.keys import Keys
        from hookbus.workers.fleet.heartbeat import list_workers

        client = connect(self.url)
        keys = Keys.for_namespace(self.settings.namespace)
        waiting = {proc.pid: role for role, proc in self.workers.items()}
        deadline = time.monotonic() + WORKER_READY_TIMEOUT_S
        while waiting and time.monotonic() < deadline:
            for info in list_workers(client, keys):
                waiting.pop(info.pid, None)
            for role, proc in self.workers.items():
                if proc.poll() is not None and proc.pid in waiting:
                    del waiting[proc.pid]
                    log.error("%s worker exited with code %s at start", role, proc.returncode)
            time.sleep(0.02)
        for role in waiting.values():
            log.warning("%s worker sent no heartbeat within %.0f s", role, WORKER_READY_TIMEOUT_S)

    def _push_hooks(self) -> None:
        if self.hooks_dir is None or not self.hooks_dir.is_dir() or self.release is None:
            return
        from hookbus.bus.connection import connect

        result = self.release(
            connect(self.url), self._child_settings(), self.hooks_dir, who="hookbus dev"
        )
        self.bundle_version = result.version

    def _child_settings(self) -> Settings:
        import msgspec

        return msgspec.structs.replace(self.settings, redis_url=self.url)

    def _spawn(self, role: str) -> subprocess.Popen[bytes]:
        args = [sys.executable, "-m", "hookbus", "worker", "--role", role]
        if self.hooks_dir is not None:
            args += ["--hooks-dir", str(self.hooks_dir)]
        env = dict(os.environ)
        env["HOOKBUS_REDIS_URL"] = self.url
        env["HOOKBUS_NAMESPACE"] = self.settings.namespace
        if not env.get(signing.VERIFY_KEY_ENV):
            env[signing.UNSIGNED_SAID_ENV] = "1"  # `hookbus dev`'s banner says it once
        return subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)

    def check(self) -> list[str]:
        """Restart workers that exited; return a line for each event worth telling."""
        news: list[str] = []
        for role, proc in list(self.workers.items()):
            code = proc.poll()
            if code is None:
                continue
            count = self.restarts.get(role, 0)
            if count >= MAX_RESTARTS:
                news.append(f"{role} worker exited with code {code}; not restarting again")
                del self.workers[role]
                continue
            self.restarts[role] = count + 1
            self.workers[role] = self._spawn(role)
            news.append(f"{role} worker exited with code {code}; restarted")
        return news

    def stop(self) -> None:
        """SIGTERM every worker, wait for them (then SIGKILL), stop the server."""
        workers, self.workers = self.workers, {}
        for proc in workers.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + WORKER_STOP_TIMEOUT_S
        for proc in workers.values():
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.server is not None:
            self.server.stop()
            self.server = None
