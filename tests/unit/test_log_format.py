"""``--log-format json``: every log line is one JSON object a shipper can read as is."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys

import pytest

from hookbus.cli.logs import JsonFormatter, TextFormatter, configure_logging


def record(msg: str, *args: object, fields: dict[str, object] | None = None) -> logging.LogRecord:
    rec = logging.LogRecord(
        "hookbus.workers.chain.runner", logging.INFO, __file__, 1, msg, args, None
    )
    if fields is not None:
        rec.fields = fields
    return rec


def test_a_json_line_carries_level_logger_message_and_the_structured_fields() -> None:
    fields = {"hook": "guard", "event": "PreToolUse", "outcome": "deny", "duration_ms": 0.4}
    line = JsonFormatter().format(record("hook %s ran", "guard", fields=fields))

    data = json.loads(line)
    assert data["level"] == "INFO"
    assert data["logger"] == "hookbus.workers.chain.runner"
    assert data["msg"] == "hook guard ran"
    assert {k: data[k] for k in fields} == fields
    assert data["ts"].endswith("+00:00")


def test_a_field_cannot_overwrite_the_message_or_level() -> None:
    data = json.loads(JsonFormatter().format(record("real", fields={"msg": "fake", "level": "X"})))
    assert (data["msg"], data["level"]) == ("real", "INFO")


def test_an_exception_is_one_json_line_with_the_traceback_as_text() -> None:
    try:
        raise RuntimeError("boom\nsecond line")
    except RuntimeError:
        rec = record("failed")
        rec.exc_info = sys.exc_info()
    line = JsonFormatter().format(rec)
    assert "\n" not in line
    assert "RuntimeError: boom" in json.loads(line)["exc"]


def test_the_text_format_appends_fields_as_key_value() -> None:
    line = TextFormatter().format(record("hook ran", fields={"hook": "guard", "outcome": "allow"}))
    assert line.endswith("hookbus.workers.chain.runner: hook ran hook=guard outcome=allow")


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="text or json"):
        configure_logging("INFO", "xml")  # type: ignore[arg-type]


def test_configured_json_logging_writes_only_json_lines_to_stderr() -> None:
    code = (
        "import logging\n"
        "from hookbus.cli.logs import configure_logging\n"
        "configure_logging('info', 'json')\n"
        "configure_logging('info', 'json')\n"  # twice: still one handler
        "logging.getLogger('x').info('one', extra={'fields': {'n': 1}})\n"
        "logging.getLogger('y').debug('hidden')\n"
        "logging.getLogger('z').warning('two')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    assert [(d["msg"], d.get("n")) for d in lines] == [("one", 1), ("two", None)]


@pytest.mark.integration
def test_a_worker_started_with_log_format_json_logs_only_json_lines(
    real_redis_url: str, namespace: str
) -> None:
    import os
    import signal
    import time

    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env.update(HOOKBUS_REDIS_URL=real_redis_url, HOOKBUS_NAMESPACE=namespace)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hookbus",
            "--log-format",
            "json",
            "--log-level",
            "info",
            "worker",
            "--role",
            "chain",
        ],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    # until its first heartbeat: it has logged its start by then (a fixed wait is too short
    # on a loaded host)
    import redis

    from hookbus.bus import keys

    client = redis.Redis.from_url(real_redis_url)
    end = time.monotonic() + 60
    while not client.hlen(keys.workers(namespace)) and time.monotonic() < end:
        time.sleep(0.05)
    client.close()
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    lines = err.splitlines()
    assert lines, "the worker logged nothing at INFO"
    records = [json.loads(line) for line in lines]
    assert any("serving" in r["msg"] for r in records)
    assert {r["level"] for r in records} <= {"INFO", "WARNING", "ERROR"}


def test_a_bad_log_format_is_a_configuration_error_naming_the_variable() -> None:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env["HOOKBUS_LOG_FORMAT"] = "xml"
    done = subprocess.run(
        [sys.executable, "-m", "hookbus", "config", "show"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 78
    assert "HOOKBUS_LOG_FORMAT='xml'" in done.stderr


def test_records_go_to_the_current_stderr_after_the_configuring_one_was_closed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A CLI run under a test runner configures logging on the runner's stream, which is
    closed when the run ends; later records must reach the stderr of their time, not turn
    into "Logging error" reports."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    swapped, real = io.StringIO(), sys.stderr
    try:
        sys.stderr = swapped
        configure_logging("WARNING")
        sys.stderr = real
        swapped.close()
        logging.getLogger("hookbus.test").warning("after the swap")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    err = capsys.readouterr().err
    assert "after the swap" in err and "Logging error" not in err
