"""Helpers shared by the reload tests (unit, integration, CLI): tiny hook folders."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import redis

from hookbus.bus.keys import Keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Decision
from hookbus.workers.fleet.heartbeat import list_workers


def write_hook(
    root: Path,
    name: str,
    *,
    events: tuple[str, ...] = ("PreToolUse",),
    priority: int = 100,
    text: str | None = None,
    enabled: bool = True,
) -> Path:
    """A ``prompt_inject`` hook whose context line (``text``, default ``ran:<name>``)
    shows in a decision when it ran."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    kinds = ", ".join(f'"{e}"' for e in events)
    (folder / "HOOK.toml").write_text(
        f'name = "{name}"\n'
        f"events = [{kinds}]\n"
        f"priority = {priority}\n"
        f"enabled = {'true' if enabled else 'false'}\n"
        "[action.prompt_inject]\n"
        f'content = "{text or f"ran:{name}"}"\n'
    )
    return folder


def write_shell_hook(
    root: Path, name: str, script: str, *, events: tuple[str, ...] = ("PreToolUse",)
) -> Path:
    """A shell hook running ``./run.sh`` (made executable) from its folder."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    run = folder / "run.sh"
    run.write_text("#!/bin/sh\n" + script + "\n")
    os.chmod(run, 0o755)
    kinds = ", ".join(f'"{e}"' for e in events)
    (folder / "HOOK.toml").write_text(
        f'name = "{name}"\nevents = [{kinds}]\n[action.shell]\ncommand = ["./run.sh"]\n'
    )
    return folder


def write_broken_hook(root: Path, name: str) -> Path:
    """A hook folder whose manifest does not parse."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "HOOK.toml").write_text('name = "broken"\nevents = [\n')
    return folder


def run_worker_main() -> None:
    """Entry point of the chain worker processes the reload integration tests start:
    ``python -c "from tests.reload_helpers import run_worker_main; run_worker_main()" DIR``.

    The registry has one static hook (``static-guard``, context ``ran:static``, priority 1)
    so tests can check that static hooks survive reloads; the HookHost follows bundles.
    Settings come from the ``HOOKBUS_*`` environment. SIGTERM stops it cleanly.
    """
    import signal
    import sys

    from hookbus.bus.settings.loader import load_settings
    from hookbus.bus.wire import HookResult
    from hookbus.hooks.registry import HookRegistry
    from hookbus.workers.chain.worker import run_chain_worker

    settings = load_settings().settings
    registry = HookRegistry(settings.catalogue())
    registry.register(
        "static-guard",
        lambda event: HookResult(context=["ran:static"]),
        events=["PreToolUse"],
        priority=1,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    run_chain_worker(settings, hooks_dir=Path(sys.argv[1]), registry=registry, stop_event=stop)


ROOT = Path(__file__).resolve().parents[1]


START_TIMEOUT_S = 30.0


class Fleet:
    """Chain worker processes on one namespace, stopped (SIGTERM, then SIGKILL) at the end."""

    def __init__(self, url: str, settings: Settings, hooks_dir: Path, data_dir: Path) -> None:
        self.url = url
        self.settings = settings
        self.hooks_dir = hooks_dir
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
        self.env.update(
            HOOKBUS_REDIS_URL=url,
            HOOKBUS_NAMESPACE=settings.namespace,
            HOOKBUS_RELOAD__DATA_DIR=str(data_dir),
            HOOKBUS_WORKERS__HEARTBEAT_INTERVAL_MS="200",
            PYTHONPATH=str(ROOT),
        )
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, n: int, client: redis.Redis) -> list[str]:
        """Start ``n`` workers and wait for their first heartbeats; returns their ids."""
        keys = Keys.for_namespace(self.settings.namespace)
        before = {w.id for w in list_workers(client, keys)}
        for _ in range(n):
            self.procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-c",
                        "from tests.reload_helpers import run_worker_main; run_worker_main()",
                        str(self.hooks_dir),
                    ],
                    cwd=ROOT,
                    env=self.env,
                )
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            new = [w.id for w in list_workers(client, keys) if w.id not in before]
            if len(new) >= n:
                return new
            time.sleep(0.05)
        raise AssertionError(f"{n} workers did not start within {START_TIMEOUT_S}s")

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)


def ran(decision: Decision) -> list[str]:
    return [c for c in decision.context if c.startswith("ran:")]


def replace_hooks(root: Path, *names: str) -> None:
    for child in root.iterdir():
        for f in child.iterdir():
            f.unlink()
        child.rmdir()
    for name in names:
        write_hook(root, name)
