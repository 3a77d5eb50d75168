"""Every hookbus command shown in README.md, docs/ and examples/ parses against the real CLI:
the commands of shell blocks fully (command, flags, values, required options), the inline
``hookbus ...`` quotes as commands or synopses (``[--yes]``, ``a|b``); and the supervisor
walkthrough passes its panes what they need (PATH and the bus's address, by value) and
writes its logs under no hard-coded /tmp folder."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.cli_syntax_helpers import (
    check_command_line,
    check_inline,
    command_words,
    inline_commands,
    shell_lines,
)

ROOT = Path(__file__).resolve().parents[2]
DOCS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "examples").rglob("*.md")),
]
SUPERVISOR = ROOT / "examples" / "supervisor"


def _shell() -> list[tuple[str, str]]:
    return [
        (f"{path.relative_to(ROOT)}:{number}", line)
        for path in DOCS
        for number, line in shell_lines(path.read_text())
    ]


def _inline() -> list[tuple[str, str]]:
    return [
        (str(path.relative_to(ROOT)), command)
        for path in DOCS
        for command in inline_commands(path.read_text())
    ]


def test_there_are_commands_to_check() -> None:
    assert len(_shell()) >= 40
    assert len(_inline()) >= 100


@pytest.mark.parametrize(("where", "line"), _shell(), ids=lambda v: str(v)[:50])
def test_each_command_of_a_shell_block_parses(where: str, line: str) -> None:
    words = command_words(line)
    assert words or line.split()[:1] == ["hookbus"], line
    assert check_command_line(words) is None, (where, check_command_line(words))


@pytest.mark.parametrize(("where", "text"), _inline(), ids=lambda v: str(v)[:50])
def test_each_inline_command_parses(where: str, text: str) -> None:
    assert check_inline(text) is None, (where, check_inline(text))


def test_the_supervisor_panes_get_path_and_the_bus_address_by_value() -> None:
    text = (SUPERVISOR / "README.md").read_text()
    sessions = [line for line in text.splitlines() if "tmux new-session" in line]
    assert sessions
    block = text[text.index(sessions[0]) :].split("```")[0].replace("\\\n", " ")
    flags = re.findall(r"-e\s+(\S+)", block)
    assert flags, block
    assert all("=" in flag for flag in flags), f"tmux -e without a value: {flags}"
    names = {flag.strip("\"'").split("=")[0] for flag in flags}
    assert {"PATH", "HOOKBUS_REDIS_URL", "HOOKBUS_NAMESPACE"} <= names


def test_the_supervisor_example_writes_under_no_hard_coded_tmp_folder() -> None:
    for path in [SUPERVISOR / "README.md", *sorted((SUPERVISOR / "hooks").rglob("*"))]:
        if path.is_file():
            assert "/tmp/" not in path.read_text(), path
