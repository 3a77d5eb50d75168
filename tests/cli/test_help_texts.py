"""Every command's ``--help`` reads as a person expects: real flag syntax (no ``<bool>`` after
a flag, no Python types), no reStructuredText markup, one example that parses against the
command itself; and ``hookbus --install-completion`` installs a completion that answers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hookbus.cli.helptext import example_of
from hookbus.cli.root import app
from tests.cli_syntax_helpers import check_command_line, cli_tree, command_words, commands

ROOT = Path(__file__).resolve().parents[2]
#: What typer prints for a Python type: <bool>, <str>, <list[str]>, <int range>, <path>...
PYTHON_TYPE = re.compile(r"<(?:bool|str|int|float|path|file|dir|list\[[^\]]*\]|\w+ range)>")
#: reStructuredText a terminal shows literally.
RST = re.compile(r"``|:(?:func|class|mod|meth|data|attr|ref):`")
PATHS = [path for path, _ in commands()]


def _help(*words: str) -> str:
    out = CliRunner().invoke(app, [*words, "--help"], env={"COLUMNS": "100"}, terminal_width=100)
    assert out.exit_code == 0, out.output
    return out.output


@pytest.mark.parametrize("path", ["", *PATHS], ids=lambda p: p or "hookbus")
def test_the_help_shows_flag_syntax_not_python_types_nor_rst(path: str) -> None:
    text = _help(*path.split())
    assert not PYTHON_TYPE.findall(text), text
    assert not RST.findall(text), text


@pytest.mark.parametrize("path", PATHS)
def test_every_command_ends_its_help_with_an_example_that_parses(path: str) -> None:
    example = example_of(path)
    assert example, f"no example for `hookbus {path}`"
    assert f"Example: {example}" in " ".join(_help(*path.split()).split())
    words = command_words(example)
    assert " ".join(words).startswith(path), example
    assert check_command_line(words) is None, check_command_line(words)


def test_the_redis_url_help_names_dev_s_state_file() -> None:
    option = next(p for p in cli_tree().params if "--redis-url" in p.opts)
    assert "hookbus dev" in option.help
    assert "HOOKBUS_REDIS_URL" in option.help


def test_install_completion_installs_a_completion_that_answers(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "SHELL": "/bin/bash", "PYTHONPATH": str(ROOT)}
    installed = subprocess.run(
        [sys.executable, "-m", "hookbus", "--install-completion", "bash"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert installed.returncode == 0, installed.stderr
    script = (tmp_path / ".bash_completions" / "hookbus.sh").read_text()
    assert "_HOOKBUS_COMPLETE=complete_bash" in script
    assert ".bash_completions/hookbus.sh" in (tmp_path / ".bashrc").read_text()
    asked = subprocess.run(
        [sys.executable, "-m", "hookbus"],
        env={**env, "_HOOKBUS_COMPLETE": "complete_bash", "COMP_WORDS": "hookbus worker --role "}
        | {"COMP_CWORD": "3"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert asked.stdout.split() == ["chain", "fanout", "rq"], asked.stderr
