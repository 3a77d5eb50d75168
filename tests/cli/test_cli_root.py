"""The root command as people and scripts type it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hookbus.bus.embedded import free_port


def run(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    base["COLUMNS"] = "200"
    base.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "hookbus", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=base,
        timeout=60,
    )


def test_help_lists_the_commands() -> None:
    out = run("--help")
    assert out.returncode == 0
    for word in ("config", "dev", "--redis-url", "--namespace", "--json"):
        assert word in out.stdout


def test_version_prints_the_package_version() -> None:
    import hookbus

    out = run("--version")
    assert out.returncode == 0
    assert out.stdout.strip() == f"hookbus {hookbus.__version__}"


def test_config_show_json_reports_values_and_their_sources(tmp_path: Path) -> None:
    (tmp_path / "hookbus.toml").write_text('namespace = "from-file"\n')
    env = {"HOOKBUS_REDIS_URL": "redis://bus:pw@127.0.0.1:6390/0"}
    out = run("--namespace", "from-flag", "config", "show", "--json", cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["settings"]["namespace"] == "from-flag"
    assert data["sources"]["namespace"] == "flag"
    assert data["settings"]["redis_url"] == "redis://bus:***@127.0.0.1:6390/0"
    assert data["sources"]["redis_url"] == "env:HOOKBUS_REDIS_URL"
    assert data["file"].endswith("hookbus.toml")


def test_global_json_flag_works_too(tmp_path: Path) -> None:
    out = run("--json", "config", "show", cwd=tmp_path)
    assert out.returncode == 0
    assert json.loads(out.stdout)["settings"]["namespace"] == "default"


def test_config_show_for_people_is_a_table(tmp_path: Path) -> None:
    out = run("config", "show", cwd=tmp_path)
    assert out.returncode == 0
    assert "streams.max_event_bytes" in out.stdout
    assert "default" in out.stdout


def test_a_malformed_hookbus_toml_is_one_clear_line_and_exit_78(tmp_path: Path) -> None:
    (tmp_path / "hookbus.toml").write_text("namespace = = 'x'\n")
    out = run("config", "show", cwd=tmp_path)
    assert out.returncode == 78  # EX_CONFIG (was 1 before exit codes were separated)
    assert "hookbus.toml" in out.stderr
    assert "not valid TOML" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("bad", ["bad ns{x}", "a:b", "x" * 65])
def test_a_bad_namespace_in_the_environment_is_one_config_line_and_exit_78(
    tmp_path: Path, bad: str
) -> None:
    out = run("--json", "status", cwd=tmp_path, env={"HOOKBUS_NAMESPACE": bad})
    assert out.returncode == 78
    assert "Traceback" not in out.stderr
    error = json.loads(out.stdout)["error"]
    assert "HOOKBUS_NAMESPACE" in error
    assert "not a valid namespace" in error


def test_python_dash_m_hookbus_works() -> None:
    out = run("--help")
    assert "Usage" in out.stdout


@pytest.mark.parametrize(
    "args", [["--no-such-flag"], ["no-such-command"], ["publish", "--no-such-flag", "Stop"]]
)
def test_bad_usage_exits_64_not_2_which_means_deny(args: list[str]) -> None:
    out = run(*args)
    assert out.returncode == 64  # EX_USAGE; click's own 2 is what an agent CLI reads as deny
    assert "Traceback" not in out.stderr


def test_an_unreachable_redis_is_one_clear_line_and_exit_69(tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    out = run("--redis-url", url, "dev", "--no-workers", cwd=tmp_path)
    assert out.returncode == 69  # EX_UNAVAILABLE
    assert f"cannot reach Redis at {url}" in out.stderr
    assert "hookbus dev" in out.stderr
    assert "Traceback" not in out.stderr
    assert "stopping" not in out.stdout


def test_error_lines_print_brackets_literally(capsys: pytest.CaptureFixture[str]) -> None:
    import typer

    from hookbus.cli.support import fail

    with pytest.raises(typer.Exit):
        fail("the mcp package is not installed: pip install 'hookbus[mcp]'")
    assert "pip install 'hookbus[mcp]'" in capsys.readouterr().err


def test_log_level_from_hookbus_toml_is_applied(tmp_path: Path) -> None:
    broken = tmp_path / "hooks" / "broken"
    broken.mkdir(parents=True)
    (broken / "HOOK.toml").write_text("name = = 'x'\n")
    quiet = run("hooks", "list", "--dir", "hooks", cwd=tmp_path)
    assert " DEBUG " not in quiet.stderr
    (tmp_path / "hookbus.toml").write_text('log_level = "DEBUG"\n')
    loud = run("hooks", "list", "--dir", "hooks", cwd=tmp_path)
    assert " DEBUG hookbus." in loud.stderr


def test_a_bad_log_level_anywhere_is_a_usage_error(tmp_path: Path) -> None:
    out = run("config", "show", cwd=tmp_path, env={"HOOKBUS_LOG_LEVEL": "loud"})
    assert out.returncode == 64
    assert "log level must be" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["status", "--watch", "--interval", "0"],
        ["dlq", "list", "--limit", "0"],
        ["worker", "--role", "chain", "--concurrency", "0"],
        ["worker", "--role", "chain", "--concurrency", "5000"],
        ["tail", "--count", "-1"],
    ],
)
def test_out_of_range_numbers_are_usage_errors_before_anything_runs(args: list[str]) -> None:
    out = run("--redis-url", "redis://127.0.0.1:1/0", *args)
    assert out.returncode == 64, out.stderr
    assert "Invalid value" in out.stderr
