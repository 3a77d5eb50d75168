"""Output never cuts an id, a URL or a path: on a terminal a table wraps between words, or
gives way to one record per block when it does not fit (80 and 40 columns); piped, nothing
is wrapped at all (``hooks list``, ``dlq list``, ``publish --wait | cat``)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from hookbus.authoring.scaffold import create_hook
from hookbus.cli import support
from hookbus.cli.fleet import dlq as dlq_cli
from hookbus.cli.hooks.manage import app as hooks_app
from hookbus.workers.fleet import dead_letters
from hookbus.workers.fleet.dead_letters import DeadJob

runner = CliRunner()
HOOK_NAMES = ("python-guard-of-destructive-shell-commands", "h2")
JOB_ID = "hb-3f9a0c1e-52d4-4b7e-9d0a-6c1f2e8b7a90-PreToolUse-secret-file-guard"
ERROR = "ConnectionError: https://hooks.example.com/a/very/long/path/to/the/hook/endpoint refused"


@pytest.fixture(params=[80, 40, None], ids=["80-columns", "40-columns", "piped"])
def screen(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[io.StringIO]:
    """What the command prints: a terminal of that many columns, or a pipe (None)."""
    monkeypatch.setattr(support, "_consoles", {})
    buffer = io.StringIO()
    if request.param is not None:
        terminal = Console(file=buffer, width=request.param, force_terminal=True, color_system=None)
        support._consoles["console"] = terminal
    else:
        monkeypatch.setenv("COLUMNS", "40")  # a pipe ignores the terminal's width
    yield buffer


def _output(result: object, screen: io.StringIO) -> list[str]:
    text = screen.getvalue() or getattr(result, "output", "")
    return [line.rstrip() for line in text.splitlines()]


def test_hooks_list_never_cuts_a_hook_id(screen: io.StringIO, tmp_path: Path) -> None:
    for name in HOOK_NAMES:
        create_hook(tmp_path, name, "PreToolUse", action="python")
    result = runner.invoke(hooks_app, ["list", "--dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    lines = _output(result, screen)
    for name in HOOK_NAMES:
        assert any(name in line.split() or f"id: {name}" == line for line in lines), lines
    if screen.getvalue() == "":  # piped: one line per hook, every field on it
        (row,) = [line for line in lines if HOOK_NAMES[0] in line]
        assert "PreToolUse" in row and "all events" in row, row


def test_dlq_list_never_cuts_a_job_id_or_a_url(
    screen: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    dead = DeadJob(
        id=JOB_ID,
        hook="secret-file-guard",
        event="ev-0193a8f2c4d5",
        kind="PreToolUse",
        events=1,
        failed_at="2026-11-27T19:00:00+00:00",
        error=ERROR,
        tries=5,
    )
    monkeypatch.setattr(dead_letters, "list_dead", lambda client, settings, limit: [dead])
    monkeypatch.setattr(dead_letters, "count_dead", lambda client, settings: 1)
    app = typer.Typer()
    app.add_typer(dlq_cli.app, name="dlq")
    result = runner.invoke(app, ["dlq", "list"], env={"HOOKBUS_CONFIG": ""})
    assert result.exit_code == 0, result.output
    lines = _output(result, screen)
    words = [word for line in lines for word in line.split()]
    assert (
        JOB_ID in words
        and "https://hooks.example.com/a/very/long/path/to/the/hook/endpoint" in words
    )
    if screen.getvalue() == "":
        (row,) = [line for line in lines if JOB_ID in line]
        assert ERROR in row, row


def test_publish_wait_piped_prints_the_whole_reason_on_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env.update(
        COLUMNS="40",
        HOOKBUS_REDIS_URL="redis://127.0.0.1:1/0",
        HOOKBUS_NAMESPACE="a-namespace-with-a-rather-long-name-for-this-test",
    )
    done = subprocess.run(
        [sys.executable, "-m", "hookbus", "publish", "PreToolUse", "--wait"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    # 69 (service unavailable): the policy's deny came from the bus being down, not from a hook.
    assert done.returncode == 69, done.stderr
    (line,) = done.stdout.splitlines()
    assert line.startswith("deny: Redis unreachable")
    assert "namespace 'a-namespace-with-a-rather-long-name-for-this-test'" in line, line
    assert line.endswith("(degraded: decided by policy, not by the hooks)"), line


def test_a_table_that_fits_keeps_every_kept_value_whole_and_wraps_the_rest_by_word() -> None:
    buffer = io.StringIO()
    terminal = Console(file=buffer, width=60, force_terminal=True, color_system=None)
    columns = (support.Column("id", keep=True), support.Column("note"))
    note = "a note long enough that it has to wrap over several lines here"
    support.print_table("t", columns, [(JOB_ID[:30], note)], out=terminal)
    lines = buffer.getvalue().splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 60
    assert any(JOB_ID[:30] in line for line in lines)
    wrapped = [word for line in lines[3:] for word in line.split()]
    assert wrapped[1:] == note.split()  # every word whole, in order


def test_hooks_info_prints_every_path_whole(screen: io.StringIO, tmp_path: Path) -> None:
    name = HOOK_NAMES[0]
    create_hook(tmp_path, name, "PreToolUse", action="python")
    result = runner.invoke(hooks_app, ["info", name, "--dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    words = [word for line in _output(result, screen) for word in line.split()]
    assert f"{tmp_path / name / 'handler.py'}:handle" in words, words
    assert str(tmp_path / name / "HOOK.toml") in words, words
