"""The tmux driver on real tmux servers (a private ``-L`` socket per test, killed after).

Panes run ``cat > FILE`` instead of a shell: the file holds exactly the characters the
driver delivered, and nothing in the pane can execute them.
"""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from hookbus.cli.agents.tmux import tmux as tmux_command
from hookbus.errors import TmuxError
from hookbus.supervisor.tmux_driver import ACTIONS, TmuxDriver, TmuxServer, usage_lines

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


@pytest.fixture
def server() -> Iterator[TmuxServer]:
    srv = TmuxServer(socket_name=f"hbtest-{uuid.uuid4().hex[:10]}")
    yield srv
    subprocess.run(srv.argv("kill-server"), capture_output=True, check=False)


def start(server: TmuxServer, name: str, command: str) -> None:
    server.run("new-session", "-d", "-s", name, "-x", "120", "-y", "30", command)


@pytest.fixture
def catcher(server: TmuxServer, tmp_path: Path) -> Callable[[str], Path]:
    """Start a session whose pane writes what it receives to a file; returns the file."""

    def make(name: str) -> Path:
        out = tmp_path / f"{name}.out"
        out.touch()
        start(server, name, f"cat > {out}")
        return out

    return make


def received(path: Path, expected: str, timeout_s: float = 5.0) -> str:
    end = time.monotonic() + timeout_s
    text = path.read_text()
    while text != expected and time.monotonic() < end:
        time.sleep(0.05)
        text = path.read_text()
    return text


def test_type_puts_literal_text_in_the_pane_unexecuted(
    server: TmuxServer, catcher: Callable[[str], Path], tmp_path: Path
) -> None:
    out = catcher("agent")
    marker = tmp_path / "marker"
    text = f"$(touch {marker}); echo $HOME `id` 'q' \"dq\" Enter C-c \\ ~ *"
    TmuxDriver("agent", server).type(text)
    assert received(out, text + "\n") == text + "\n"
    assert not marker.exists()


def test_text_that_looks_like_an_option_is_still_text(
    server: TmuxServer, catcher: Callable[[str], Path]
) -> None:
    out = catcher("agent")
    TmuxDriver("agent", server).type("-l --help")
    assert received(out, "-l --help\n") == "-l --help\n"


@pytest.mark.parametrize(
    ("action", "args", "expected"),
    [
        ("choose", ["2"], "2\n"),
        ("enter", [], "\n"),
        ("submit", [], "\t\n"),
        ("type", ["hello", "world"], "hello world\n"),
        # a key name alone is still text: without send-keys -l tmux would press the key
        ("type", ["Enter"], "Enter\n"),
        ("type", ["Escape"], "Escape\n"),
    ],
)
def test_each_key_action_delivers_its_keys(
    server: TmuxServer,
    catcher: Callable[[str], Path],
    action: str,
    args: list[str],
    expected: str,
) -> None:
    out = catcher("agent")
    TmuxDriver("agent", server).perform(action, args)
    assert received(out, expected) == expected


def test_esc_sends_escape(server: TmuxServer, catcher: Callable[[str], Path]) -> None:
    out = catcher("agent")
    driver = TmuxDriver("agent", server)
    driver.esc()
    driver.enter()
    assert received(out, "\x1b\n") == "\x1b\n"


def test_clear_then_clears_the_context_then_sends_the_command(
    server: TmuxServer, catcher: Callable[[str], Path]
) -> None:
    out = catcher("agent")
    TmuxDriver("agent", server).clear_then("/gsd:resume-work", delay_s=0.05)
    expected = "/clear\n/gsd:resume-work\n"
    assert received(out, expected) == expected


def test_snapshot_prints_the_pane(server: TmuxServer) -> None:
    start(server, "agent", "printf 'first line\\nEnter to select\\n'; sleep 60")
    driver = TmuxDriver("agent", server)
    end = time.monotonic() + 5
    shot = driver.snapshot()
    while "Enter to select" not in shot and time.monotonic() < end:
        time.sleep(0.05)
        shot = driver.snapshot()
    assert "first line\nEnter to select" in shot


def test_a_session_name_is_matched_exactly_never_by_prefix(
    server: TmuxServer, catcher: Callable[[str], Path]
) -> None:
    main = catcher("warden-main")
    catcher("other")
    with pytest.raises(TmuxError, match="can't find"):
        TmuxDriver("warden", server).type("wrong session")
    TmuxDriver("warden-main", server).type("right")
    assert received(main, "right\n") == "right\n"


def test_choose_refuses_anything_but_an_option_number(server: TmuxServer) -> None:
    start(server, "agent", "sleep 60")
    with pytest.raises(TmuxError, match="option number"):
        TmuxDriver("agent", server).choose("1; rm -rf /")


def test_every_action_in_the_usage_lines_is_accepted_by_the_driver() -> None:
    lines = usage_lines("s1")
    assert [line.split()[3] for line in lines] == list(ACTIONS)
    assert "hookbus tmux s1 choose <n>" in lines


def test_the_cli_types_literal_text_and_exits_1_on_an_unknown_session(
    server: TmuxServer, catcher: Callable[[str], Path]
) -> None:
    out = catcher("agent")
    app = typer.Typer()
    app.command("tmux")(tmux_command)
    app.command("noop")(lambda: None)
    runner = CliRunner()
    assert server.socket_name is not None
    sock = ["tmux", "-L", server.socket_name]
    done = runner.invoke(app, [*sock, "agent", "type", "--", "--not-an-option $HOME"])
    assert done.exit_code == 0, done.output
    assert received(out, "--not-an-option $HOME\n") == "--not-an-option $HOME\n"
    missing = runner.invoke(app, [*sock, "nobody", "enter"])
    assert missing.exit_code == 1
    assert "can't find session" in missing.output
    unknown = runner.invoke(app, [*sock, "agent", "dance"])
    assert unknown.exit_code == 1
    assert "unknown action 'dance'" in unknown.output
