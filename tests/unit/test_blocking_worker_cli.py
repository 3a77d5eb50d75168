"""The worker command's signal handling and role dispatch (no Redis needed)."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from hookbus.cli.fleet import worker as cli
from hookbus.workers.fleet.signals import graceful_signals


def test_the_first_signal_asks_for_a_graceful_stop_and_handlers_are_restored() -> None:
    before = signal.getsignal(signal.SIGTERM)
    stop = threading.Event()
    with graceful_signals(stop):
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.wait(2)
        os.kill(os.getpid(), signal.SIGTERM)  # a second SIGTERM only repeats the request
        assert stop.is_set()
    assert signal.getsignal(signal.SIGTERM) is before


def test_outside_the_main_thread_no_handler_is_installed() -> None:
    seen: list[object] = []

    def body() -> None:
        with graceful_signals(threading.Event()):
            seen.append(signal.getsignal(signal.SIGINT))

    before = signal.getsignal(signal.SIGINT)
    thread = threading.Thread(target=body)
    thread.start()
    thread.join(5)
    assert seen == [before]


@pytest.mark.parametrize(
    ("role", "module", "entry"),
    [
        (cli.Role.chain, "hookbus.workers.chain.worker", "run_chain_worker"),
        (cli.Role.fanout, "hookbus.workers.fanout.role", "run_dispatcher"),
        (cli.Role.rq, "hookbus.workers.fanout.rq_worker", "run_rq_worker"),
    ],
)
def test_each_role_dispatches_to_its_entry_point(
    role: cli.Role, module: str, entry: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    calls: list[tuple[object, dict[str, object]]] = []
    target = importlib.import_module(module)
    monkeypatch.setattr(target, entry, lambda settings, **kw: calls.append((settings, kw)))
    stop = threading.Event()
    cli._run_role(
        role,
        "settings",
        concurrency=3,
        hooks_dir=None,
        isolation="none",
        burst=True,
        stop_event=stop,
    )
    ((settings, kwargs),) = calls
    assert settings == "settings"
    if role is cli.Role.chain:
        assert kwargs == {
            "concurrency": 3,
            "hooks_dir": None,
            "stop_event": stop,
            "metrics_port": None,
        }
    elif role is cli.Role.fanout:
        assert kwargs == {"hooks_dir": None, "stop_event": stop, "metrics_port": None}
    else:
        assert kwargs == {
            "isolation": "none",
            "burst": True,
            "hooks_dir": None,
            "metrics_port": None,
        }


def test_a_failed_rq_job_is_logged_in_one_line_unless_debugging() -> None:
    import io
    import logging
    import traceback

    logger = logging.getLogger("tests.rq.worker")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.addFilter(cli.OneLineJobErrors())
    logger.propagate = False
    try:
        for level in (logging.INFO, logging.DEBUG):
            logger.setLevel(level)
            try:
                raise RuntimeError("hook 'boom' failed: RuntimeError: boom")
            except RuntimeError:
                logger.error("job %s: exception raised while executing", "hb-1", exc_info=True)
                # RQ's own form: the traceback formatted into the message
                text = traceback.format_exc()
                logger.error("Worker %s: job %s: exception raised\n%s", "w", "hb-2", text)
        lines = stream.getvalue().splitlines()
        assert lines[:2] == [
            "ERROR job hb-1: exception raised while executing: "
            "RuntimeError: hook 'boom' failed: RuntimeError: boom",
            "ERROR Worker w: job hb-2: exception raised: "
            "RuntimeError: hook 'boom' failed: RuntimeError: boom",
        ]
        assert lines[2] == "ERROR job hb-1: exception raised while executing"
        assert "Traceback (most recent call last):" in lines
    finally:
        logger.removeHandler(handler)
