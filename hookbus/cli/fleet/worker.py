"""``hookbus worker --role chain|fanout|rq``: run one worker role in the foreground.

The role's module is imported only when chosen, so a fleet of chain workers never imports
RQ. Signals: the first SIGTERM or SIGINT asks the worker to stop gracefully (stop reading,
finish what is in flight, acknowledge, leave); a second SIGINT exits at once (whatever was
in flight stays pending in Redis and another worker reclaims it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import redis
import typer

from hookbus.cli.support import EXIT_CONFIG, EXIT_ERROR, EXIT_UNAVAILABLE, fail, state
from hookbus.workers.fleet.signals import StopEvent, graceful_signals

if TYPE_CHECKING:
    from hookbus.bus.settings.schema import Settings


log = logging.getLogger(__name__)


class OneLineJobErrors(logging.Filter):
    """RQ logs every failed try of a job at ERROR with the whole traceback (two chained ones
    for a failing hook): in ``hookbus dev``'s terminal, or a fleet's log, one bad hook buries
    everything else. The traceback is kept with the job (``hookbus dlq show JOB`` once it is
    dead-lettered), so the line says what failed in one line; at DEBUG the traceback is
    logged as well."""

    def filter(self, record: logging.LogRecord) -> bool:
        if logging.getLogger(record.name).isEnabledFor(logging.DEBUG):
            return True
        head, _, rest = record.getMessage().partition("\n")
        if record.exc_info and record.exc_info[1] is not None:  # logged with exc_info
            exc = record.exc_info[1]
            last = f"{type(exc).__name__}: {exc}"
        elif "Traceback (most recent call last)" in rest:  # RQ formats it into the message
            last = [line for line in rest.splitlines() if line.strip()][-1].strip()
        else:
            return True
        record.msg = f"{head}: {last}"
        record.args = ()
        record.exc_info = None
        record.exc_text = None
        return True


#: The loggers RQ reports failed jobs on.
RQ_JOB_LOGGERS = ("rq.worker", "rq.job")


class Role(StrEnum):
    chain = "chain"
    fanout = "fanout"
    rq = "rq"


class IsolationChoice(StrEnum):
    fork = "fork"
    none = "none"


def _run_role(
    role: Role,
    settings: Settings,
    *,
    concurrency: int,
    hooks_dir: Path | None,
    isolation: str | None,
    burst: bool,
    stop_event: threading.Event,
    metrics_port: int | None = None,
) -> None:
    """Import the role's module lazily and call its entry point."""
    if role is Role.chain:
        from hookbus.workers.chain.worker import run_chain_worker

        run_chain_worker(
            settings,
            concurrency=concurrency,
            hooks_dir=hooks_dir,
            stop_event=stop_event,
            metrics_port=metrics_port,
        )
    elif role is Role.fanout:
        from hookbus.workers.fanout.role import run_dispatcher

        run_dispatcher(
            settings, hooks_dir=hooks_dir, stop_event=stop_event, metrics_port=metrics_port
        )
    else:
        from hookbus.workers.fanout.rq_worker import run_rq_worker

        for name in RQ_JOB_LOGGERS:
            logging.getLogger(name).addFilter(OneLineJobErrors())
        run_rq_worker(
            settings,
            isolation=isolation,
            burst=burst,
            hooks_dir=hooks_dir,
            metrics_port=metrics_port,
        )


def worker(
    ctx: typer.Context,
    role: Annotated[
        Role,
        typer.Option(
            "--role",
            envvar="HOOKBUS_WORKER_ROLE",
            help="chain: answer blocking requests; fanout: dispatch events to RQ; rq: run jobs.",
        ),
    ],
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency",
            min=1,
            max=1024,
            envvar="HOOKBUS_WORKERS__CONCURRENCY",
            help="Chains run at once (threads; for I/O-bound hooks). Default: config.",
        ),
    ] = None,
    hooks_dir: Annotated[
        Path | None,
        typer.Option(
            "--hooks-dir",
            "-d",
            envvar="HOOKBUS_HOOKS_DIR",
            help="Load hooks from this folder (default: the current bundle in Redis).",
        ),
    ] = None,
    isolation: Annotated[
        IsolationChoice | None,
        typer.Option("--isolation", help="rq role: fork a process per job, or none."),
    ] = None,
    burst: Annotated[
        bool, typer.Option("--burst", help="rq role: exit when the queue is empty.")
    ] = False,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            "--metrics-port",
            min=0,
            max=65535,
            envvar="HOOKBUS_METRICS_PORT",
            help="Serve Prometheus metrics on this port (/metrics; 0: a free one, logged).",
        ),
    ] = None,
) -> None:
    """Run one worker role in the foreground until SIGTERM / Ctrl-C."""
    settings = state(ctx).settings()
    if metrics_port is not None:
        from hookbus.workers.fleet.metrics import check_port

        try:
            check_port(metrics_port)
        except OSError as exc:
            fail(
                f"metrics port {metrics_port} cannot be served on ({exc.strerror or exc}); "
                "free it or pick another with --metrics-port / HOOKBUS_METRICS_PORT",
                EXIT_CONFIG,
            )
    stop_event = StopEvent()
    run: Callable[[], None] = lambda: _run_role(  # noqa: E731 - keeps the call readable
        role,
        settings,
        concurrency=concurrency or settings.workers.concurrency,
        hooks_dir=hooks_dir,
        isolation=isolation.value if isolation else None,
        burst=burst,
        stop_event=stop_event,
        metrics_port=metrics_port,
    )
    with graceful_signals(stop_event):
        try:
            run()
        except redis.exceptions.RedisError as exc:  # e.g. Redis unreachable at start
            from hookbus.bus.connection import translate_error

            url = (
                settings.effective_rq_redis_url if role is Role.rq else settings.effective_redis_url
            )
            fail(str(translate_error(exc, url)), EXIT_UNAVAILABLE)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("hookbus."):
                fail(f"worker role {role.value!r} is not available in this build ({exc.name})")
            raise
        except KeyboardInterrupt:
            raise typer.Exit(EXIT_ERROR) from None
