"""Helpers shared by the reload tests (unit, integration, CLI): tiny hook folders."""

from __future__ import annotations

import os
from pathlib import Path


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
    import threading

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
