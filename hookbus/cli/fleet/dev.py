"""`hookbus dev`: the whole bus on one machine, for development and demos.

The processes live in :mod:`hookbus.workers.fleet.dev`; this module parses the options,
starts the stack, prints where it is, records it in a state file that the other commands
run from this folder read (:mod:`hookbus.bus.dev_state`), and waits for Ctrl-C.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer

from hookbus.bundles import signing
from hookbus.bus import dev_state
from hookbus.bus.settings.loader import mask_url
from hookbus.cli.support import EXIT_ERROR, console, fail, state
from hookbus.workers.fleet.dev import DevStack
from hookbus.workers.fleet.signals import StopEvent, set_soon

log = logging.getLogger(__name__)


def dev(
    ctx: typer.Context,
    hooks_dir: Annotated[
        Path | None,
        typer.Option(
            "--hooks-dir",
            "-d",
            envvar="HOOKBUS_HOOKS_DIR",
            help="Hooks folder (default: configured hooks_dir).",
        ),
    ] = None,
    no_workers: Annotated[
        bool, typer.Option("--no-workers", help="Only start the server; run workers yourself.")
    ] = False,
    unix_socket: Annotated[
        bool, typer.Option("--unix-socket", help="Embedded server on a unix socket, not TCP.")
    ] = False,
) -> None:
    """Run the whole bus locally: an embedded server (unless a Redis URL is configured),
    a chain worker, a fan-out dispatcher and an RQ worker, with the hooks folder loaded."""
    from hookbus.authoring.release import release_folder

    cli = state(ctx)
    cli.use_dev_state = False  # this is the dev; another one running here is refused below
    settings = cli.settings()
    running = dev_state.find_state()
    if running is not None and running[0] == dev_state.state_path():
        fail(
            f"hookbus dev is already running for this folder (pid {running[1].get('pid')}, "
            f"{mask_url(str(running[1].get('redis_url')))}); stop it first, or start this one "
            f"from another folder",
            EXIT_ERROR,
        )
    folder = hooks_dir or Path(settings.hooks_dir)
    stack = DevStack(
        settings=settings,
        hooks_dir=folder if folder.is_dir() else None,
        roles=() if no_workers else ("chain", "fanout", "rq"),
        unix_socket=unix_socket,
        release=release_folder,
    )
    unsigned = not os.environ.get(signing.VERIFY_KEY_ENV)
    if unsigned:
        signing.unsigned_said()  # the banner says it once, for the push and every worker
    stopping = StopEvent()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        set_soon(stopping)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    started = False
    recorded: Path | None = None
    try:
        url = stack.start()
        started = True
        recorded = dev_state.write_state(
            redis_url=url, namespace=settings.namespace, hooks_dir=stack.hooks_dir
        )
        where = "embedded server" if stack.server else "configured Redis"
        pid = f" (pid {stack.server.pid})" if stack.server else ""
        console.print(f"[bold green]hookbus dev[/] {where} at [bold]{mask_url(url)}[/]{pid}")
        console.print(f"  export HOOKBUS_REDIS_URL={url}", highlight=False, soft_wrap=True)
        console.print(f"  namespace: {settings.namespace}")
        if stack.hooks_dir is None:
            console.print(f"  hooks: none ({folder} does not exist)", markup=False)
        else:
            version = f", bundle {stack.bundle_version}" if stack.bundle_version else ""
            console.print(f"  hooks: {stack.hooks_dir}{version}", markup=False)
        for role, proc in stack.workers.items():
            console.print(f"  {role} worker: pid {proc.pid}")
        if unsigned:
            console.print(
                f"  unsigned: bundles are neither signed nor verified ({signing.VERIFY_KEY_ENV} "
                "is not set), as fits a development bus",
                markup=False,
                soft_wrap=True,
            )
        console.print(
            f"  other hookbus commands run in this folder use it (state: {recorded})",
            markup=False,
            soft_wrap=True,
        )
        console.print("Press Ctrl-C to stop.", style="dim")
        sys.stdout.flush()
        while not stopping.wait(0.5):
            for line in stack.check():
                console.print(f"[yellow]{line}[/]")
    finally:
        if recorded is not None:
            dev_state.remove_state(recorded)
        if started:
            console.print("stopping...", style="dim")
        stack.stop()  # also cleans up after a start that failed half way
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if started:
            console.print("stopped.")
