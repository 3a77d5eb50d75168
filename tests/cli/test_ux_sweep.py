"""Bad input typed as a user would: every failure is one clear line on stderr, exit 1 (error),
64 (usage), 69 (Redis unreachable) or 78 (configuration), never a traceback, and a JSON error
object with ``--json``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import redis
import typer
from typer.testing import CliRunner

from hookbus.bus.keys import Keys
from hookbus.workers.fleet.heartbeat import Heartbeat
from tests.reload_helpers import write_hook

#: A Redis URL nothing listens on.
UNREACHABLE = "redis://127.0.0.1:1/0"


def run(
    *args: str, cwd: Path | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env["COLUMNS"] = "200"
    return subprocess.run(
        [sys.executable, "-m", "hookbus", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        input=stdin,
        timeout=60,
    )


def one_error_line(out: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def test_a_library_error_with_json_is_a_json_error_object_too(tmp_path: Path) -> None:
    out = run("hooks", "info", "nope", "--dir", str(tmp_path), "--json")
    assert out.returncode == 1
    assert "no hook named 'nope'" in one_error_line(out)
    assert json.loads(out.stdout) == {
        "ok": False,
        "error": f"no hook named 'nope' in {tmp_path} (see `hookbus hooks list`)",
    }


def test_the_global_json_flag_makes_errors_json_as_well(tmp_path: Path) -> None:
    out = run("--json", "--redis-url", UNREACHABLE, "status")
    assert out.returncode == 69
    assert "cannot reach Redis" in one_error_line(out)
    assert json.loads(out.stdout)["ok"] is False


def test_a_cli_error_with_json_is_a_json_error_object(tmp_path: Path) -> None:
    out = run("--redis-url", UNREACHABLE, "publish", "Stop", "--payload", "{bad", "--json")
    assert out.returncode == 1
    assert "--payload is not valid JSON" in one_error_line(out)
    assert "not valid JSON" in json.loads(out.stdout)["error"]


def test_errors_without_json_leave_stdout_empty(tmp_path: Path) -> None:
    out = run("hooks", "validate", str(tmp_path / "missing"))
    assert out.returncode == 1
    one_error_line(out)
    assert out.stdout == ""


def test_an_unknown_log_level_is_a_usage_error_not_a_traceback(tmp_path: Path) -> None:
    out = run("--log-level", "BOGUS", "config", "show", cwd=tmp_path)
    assert out.returncode == 64
    assert "--log-level" in one_error_line(out)


def test_dlq_commands_with_redis_unreachable_say_so_in_one_line() -> None:
    for args in (("dlq", "list"), ("dlq", "show", "x"), ("dlq", "requeue", "--all")):
        out = run("--redis-url", UNREACHABLE, *args)
        assert out.returncode == 69, args
        assert "cannot reach Redis at redis://127.0.0.1:1/0" in one_error_line(out)


def test_a_hookbus_toml_that_is_not_utf8_is_one_clear_line(tmp_path: Path) -> None:
    (tmp_path / "hookbus.toml").write_bytes(b"\xff\xfe namespace = 'x'\n")
    out = run("config", "show", cwd=tmp_path)
    assert out.returncode == 78
    line = one_error_line(out)
    assert "hookbus.toml" in line
    assert "not UTF-8" in line


def test_hooks_create_in_a_folder_that_is_a_file_is_one_clear_line(tmp_path: Path) -> None:
    not_a_folder = tmp_path / "hooks"
    not_a_folder.write_text("")
    out = run("hooks", "create", "guard", "--event", "PreToolUse", "--dir", str(not_a_folder))
    assert out.returncode == 1
    assert "cannot create hook 'guard'" in one_error_line(out)


def test_hooks_enable_on_a_malformed_manifest_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "HOOK.toml").write_text("name = = 'broken'\n")
    for command in ("enable", "disable"):
        out = run("hooks", command, "broken", "--dir", str(tmp_path))
        assert out.returncode == 1
        line = one_error_line(out)
        assert "broken/HOOK.toml" in line
        assert "not valid TOML" in line


def test_publish_file_that_is_not_utf8_is_one_clear_line(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    events.write_bytes(b'\xff{"kind": "Stop"}\n')
    out = run("--redis-url", UNREACHABLE, "publish", "--file", str(events))
    assert out.returncode == 1
    assert "not UTF-8" in one_error_line(out)


def test_publish_file_with_an_unknown_kind_names_the_line(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    events.write_text('{"kind": "Stop"}\n\n{"kind": "NoSuchKind"}\n')
    out = run("--redis-url", UNREACHABLE, "publish", "--file", str(events))
    assert out.returncode == 1
    line = one_error_line(out)
    assert f"{events}:3: unknown event kind 'NoSuchKind'" in line
    assert "nothing was published" in line


def test_hooks_validate_prints_a_broken_manifest_once_without_a_log_line(tmp_path: Path) -> None:
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "HOOK.toml").write_text("name = = 'broken'\n")
    out = run("hooks", "validate", str(tmp_path))
    assert out.returncode == 1
    assert out.stderr.count("not valid TOML") == 1, out.stderr
    assert "WARNING" not in out.stderr


def test_hooks_run_with_a_timeout_of_zero_is_a_usage_error() -> None:
    examples = Path(__file__).resolve().parents[2] / "examples" / "hooks"
    out = run("hooks", "run", "block-destructive", "--dir", str(examples), "--timeout", "0")
    assert out.returncode == 64
    assert "--timeout must be more than 0 seconds" in one_error_line(out)


def test_hooks_validate_prints_an_import_error_once_without_a_log_line(tmp_path: Path) -> None:
    (tmp_path / "py").mkdir()
    (tmp_path / "py" / "HOOK.toml").write_text(
        'name = "py"\nevents = ["PreToolUse"]\n[action.python]\nentrypoint = "handler:handle"\n'
    )
    (tmp_path / "py" / "handler.py").write_text("raise RuntimeError('boom at import')\n")
    out = run("hooks", "validate", str(tmp_path))
    assert out.returncode == 1
    assert out.stderr.count("boom at import") == 1, out.stderr
    assert "WARNING" not in out.stderr


def test_hooks_list_of_a_missing_folder_is_an_error(tmp_path: Path) -> None:
    out = run("hooks", "list", "--dir", str(tmp_path / "nope"))
    assert out.returncode == 1
    assert f"hooks folder {tmp_path / 'nope'} does not exist" in one_error_line(out)
    out = run("hooks", "list", "--dir", str(tmp_path / "nope"), "--json")
    assert out.returncode == 1
    assert json.loads(out.stdout)["ok"] is False


def _reload_cli(real_redis_url: str, namespace: str) -> Any:
    from hookbus.cli.fleet import reload as reload_cli
    from hookbus.cli.fleet import status as status_cli

    app = typer.Typer()
    app.command("reload")(reload_cli.reload)
    app.command("status")(status_cli.status)
    env = {"HOOKBUS_REDIS_URL": real_redis_url, "HOOKBUS_NAMESPACE": namespace, "COLUMNS": "250"}

    def invoke(*args: str) -> Any:
        return CliRunner().invoke(app, list(args), env=env, catch_exceptions=False)

    return invoke


def test_reload_prints_worker_problems_and_the_pusher_as_written_not_as_markup(
    tmp_path: Path, real_redis: redis.Redis, real_redis_url: str, namespace: str
) -> None:
    cli = _reload_cli(real_redis_url, namespace)
    write_hook(tmp_path, "alpha")
    stamp = Keys.for_namespace(namespace).bundle_stamp

    def following() -> str | None:
        raw = real_redis.get(stamp)
        return raw.decode() if isinstance(raw, bytes) else raw

    worker = Heartbeat(
        real_redis,
        Keys.for_namespace(namespace),
        role="chain",
        interval_ms=20,
        info=lambda: {"version": following(), "hooks": 1, "problems": ["needs [bold]x[/bold]"]},
    ).start()
    try:
        out = cli("reload", "--dir", str(tmp_path), "--who", "ci[bot]", "--wait", "5")
    finally:
        worker.stop()
    # a worker that reports a problem did not load every hook: the reload did not take
    assert out.exit_code == 1, out.output
    assert "needs [bold]x[/bold]" in out.stdout
    assert "did not load every hook: needs [bold]x[/bold]" in out.output
    listed = cli("reload", "--list")
    assert "ci[bot]" in listed.stdout


def test_hooks_info_and_list_print_hook_text_as_written_not_as_markup(tmp_path: Path) -> None:
    (tmp_path / "mk").mkdir()
    (tmp_path / "mk" / "HOOK.toml").write_text(
        'name = "mk"\n'
        "description = \"needs pip install 'hookbus[mcp]' and [bold]care[/bold]\"\n"
        'events = ["PreToolUse"]\n'
        '[match]\npattern = "rm -[a-z]*"\n'
        '[action.prompt_inject]\ncontent = "hello"\n'
    )
    info = run("hooks", "info", "mk", "--dir", str(tmp_path))
    assert info.returncode == 0, info.stderr
    assert "'hookbus[mcp]' and [bold]care[/bold]" in info.stdout
    assert "rm -[a-z]*" in info.stdout
    listed = run("hooks", "list", "--dir", str(tmp_path))
    assert listed.returncode == 0, listed.stderr
    assert "rm -[a-z]*" in listed.stdout


def test_dlq_purge_of_an_unknown_job_id_is_an_error(
    real_redis: redis.Redis, real_redis_url: str, namespace: str
) -> None:
    out = run("--redis-url", real_redis_url, "-n", namespace, "dlq", "purge", "no-such-job")
    assert out.returncode == 1
    assert "1 of the given job ids are not dead letters" in one_error_line(out)


def test_hooks_create_with_an_out_of_range_priority_leaves_nothing_behind(
    tmp_path: Path,
) -> None:
    args = ("hooks", "create", "x", "--event", "Stop", "--dir", str(tmp_path))
    out = run(*args, "--priority", "-99999999999")
    assert out.returncode == 1
    assert "priority: must be >= -1000000" in one_error_line(out)
    assert not (tmp_path / "x").exists()
    again = run(*args)
    assert again.returncode == 0, again.stderr


def test_reload_rollback_to_an_unknown_version_is_refused_with_ok_false_in_json(
    real_redis: redis.Redis, real_redis_url: str, namespace: str
) -> None:
    cli = _reload_cli(real_redis_url, namespace)
    out = cli("reload", "--rollback", "000000000000", "--json")
    assert out.exit_code == 1
    data = json.loads(out.stdout)
    assert data["ok"] is False and data["refused"] is True
    assert "bundle 000000000000 is not stored" in data["reason"]


def test_hooks_write_with_a_missing_spec_file_is_an_error_not_a_refusal(tmp_path: Path) -> None:
    out = run("hooks", "write", "--spec", str(tmp_path / "nope.json"), "--dir", str(tmp_path))
    assert out.returncode == 1
    line = one_error_line(out)
    assert line == f"error: cannot read {tmp_path / 'nope.json'}: No such file or directory"


def test_a_worker_with_redis_unreachable_ends_with_one_error_line_not_a_traceback() -> None:
    # the fan-out and RQ roles give up after the retry budget (the chain role keeps retrying)
    out = run("--redis-url", UNREACHABLE, "-n", "uxsweep", "worker", "--role", "rq")
    assert out.returncode == 69, out.stderr
    assert "Traceback" not in out.stderr and "╭" not in out.stderr, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("error: cannot reach Redis at redis://127.0.0.1:1/0"), last


def test_a_config_path_that_is_a_folder_says_so(tmp_path: Path) -> None:
    out = run("--config", str(tmp_path), "config", "show")
    assert out.returncode == 78
    assert one_error_line(out) == f"error: config file {tmp_path} is not a file"
