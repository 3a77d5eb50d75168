"""The tmux driver: how a supervisor answers the agent it was woken for.

``hookbus tmux SESSION ACTION``, with these actions:

* ``snapshot`` prints the pane (and ``lines`` of history above it);
* ``enter`` / ``esc`` press Enter / Escape;
* ``choose N`` picks option N of a numbered menu (types ``N``, then Enter);
* ``type TEXT`` clears the input line (C-u), sends TEXT **literally** (``send-keys -l``: no
  key names, no shell), then Enter;
* ``clear_then CMD`` clears the agent's context (``/clear``), waits a moment, then sends CMD
  literally and Enter (to restart work, e.g. ``clear_then /gsd:resume-work``);
* ``submit`` confirms a multi-question prompt: Tab to its Submit item, then Enter (the key
  sequence Claude Code's question prompts take).

tmux runs as an argument list (``subprocess`` without a shell), so nothing a supervisor
sends is ever interpreted by a shell. Targets are ``=SESSION:``: the exact session (tmux
otherwise matches a prefix, so ``warden`` would also reach ``warden-main``), its current
window, its active pane. Stdlib only: the lean hook path imports :func:`capture_pane`.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Sequence

from hookbus.errors import TmuxError

#: How long one tmux command may take before the driver gives up, in seconds.
TMUX_TIMEOUT_S = 5.0
#: Pause between ``/clear`` and the command of ``clear_then``, in seconds.
CLEAR_THEN_DELAY_S = 1.0
#: Lines of history ``snapshot`` prints above the visible pane when none are asked for.
SNAPSHOT_HISTORY_LINES = 40
#: The driver's actions; the ones taking an argument say so in :data:`ACTION_ARGUMENT`.
ACTIONS: tuple[str, ...] = ("snapshot", "enter", "esc", "submit", "choose", "type", "clear_then")
#: Actions that take one argument, and what it is called in usage lines.
ACTION_ARGUMENT: dict[str, str] = {"choose": "<n>", "type": "<text>", "clear_then": "<command>"}
#: Largest menu option ``choose`` accepts.
MAX_CHOICE = 99


class TmuxServer:
    """Which tmux server to talk to: the default one (``$TMUX`` inside a session), a named
    socket (``-L``) or a socket path (``-S``). A plain class: the hook path imports this
    module in a process started per event, where ``dataclasses`` alone costs milliseconds."""

    __slots__ = ("binary", "socket_name", "socket_path")

    def __init__(
        self,
        socket_name: str | None = None,
        socket_path: str | None = None,
        binary: str = "tmux",
    ) -> None:
        self.socket_name = socket_name
        self.socket_path = socket_path
        self.binary = binary

    def __repr__(self) -> str:
        where = self.socket_path or self.socket_name or "default"
        return f"TmuxServer({where!r})"

    def argv(self, *args: str) -> list[str]:
        cmd = [self.binary]
        if self.socket_path:
            cmd += ["-S", self.socket_path]
        elif self.socket_name:
            cmd += ["-L", self.socket_name]
        return [*cmd, *args]

    def run(self, *args: str, timeout: float = TMUX_TIMEOUT_S) -> str:
        """Run one tmux command; its stdout, or :class:`TmuxError` with tmux's own words."""
        argv = self.argv(*args)
        try:
            done = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                stdin=subprocess.DEVNULL,
                env=os.environ.copy(),
            )
        except FileNotFoundError:
            raise TmuxError(f"{self.binary!r} is not installed or not on PATH") from None
        except subprocess.TimeoutExpired:
            raise TmuxError(f"tmux {args[0]} did not answer within {timeout:g}s") from None
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip() or f"exit code {done.returncode}"
            raise TmuxError(f"tmux {args[0]} failed: {said}")
        return done.stdout


def target(session: str) -> str:
    """The exact-match target of a session's active pane."""
    if not session or any(c in session for c in ":.\n"):
        raise TmuxError(f"invalid tmux session name {session!r} (':' and '.' are not allowed)")
    return f"={session}:"


def capture_pane(
    server: TmuxServer, pane: str, history_lines: int, *, escapes: bool = False
) -> str:
    """``capture-pane -p -S -N``: the visible pane plus ``history_lines`` lines above it.
    ``escapes`` keeps colour escape sequences (``-e``), which the state hint reads."""
    args = ["capture-pane", "-p", "-t", pane, "-S", f"-{max(history_lines, 0)}"]
    if escapes:
        args.insert(2, "-e")
    return server.run(*args)


class TmuxDriver:
    """Drive one session: each method is one action of ``hookbus tmux``."""

    def __init__(self, session: str, server: TmuxServer | None = None) -> None:
        self.session = session
        self.server = server or TmuxServer()
        self.pane = target(session)

    def _keys(self, *keys: str) -> None:
        self.server.run("send-keys", "-t", self.pane, *keys)

    def _literal(self, text: str) -> None:
        # -l: the text is characters, never key names; "--" ends options, so text that
        # starts with '-' is still text
        self.server.run("send-keys", "-t", self.pane, "-l", "--", text)

    def snapshot(self, lines: int = SNAPSHOT_HISTORY_LINES) -> str:
        return capture_pane(self.server, self.pane, lines)

    def enter(self) -> None:
        self._keys("Enter")

    def esc(self) -> None:
        self._keys("Escape")

    def submit(self) -> None:
        self._keys("Tab")
        self._keys("Enter")

    def choose(self, option: int | str) -> None:
        text = str(option).strip()
        if not text.isdigit() or not 1 <= int(text) <= MAX_CHOICE:
            raise TmuxError(f"choose takes a menu option number 1-{MAX_CHOICE}, got {option!r}")
        self._literal(str(int(text)))
        self._keys("Enter")

    def type(self, text: str) -> None:
        if text == "":
            raise TmuxError("type requires <text>")
        self._keys("C-u")
        self._literal(text)
        self._keys("Enter")

    def clear_then(self, command: str, *, delay_s: float = CLEAR_THEN_DELAY_S) -> None:
        if command == "":
            raise TmuxError("clear_then requires <command>")
        self.type("/clear")
        time.sleep(delay_s)
        self.type(command)

    def perform(self, action: str, args: Sequence[str] = (), *, lines: int | None = None) -> str:
        """Run ``action`` by name (the CLI's entry point); returns what it prints."""
        if action not in ACTIONS:
            raise TmuxError(f"unknown action {action!r}; use one of {', '.join(ACTIONS)}")
        wanted = 1 if action in ACTION_ARGUMENT else 0
        if action == "type" or action == "clear_then":
            if not args:
                raise TmuxError(f"{action} requires {ACTION_ARGUMENT[action]}")
            # several words are one text, as a shell user would expect from `type hello world`
            args = [" ".join(args)]
        if len(args) != wanted:
            usage = f" {ACTION_ARGUMENT[action]}" if wanted else ""
            raise TmuxError(f"usage: hookbus tmux SESSION {action}{usage}")
        if action == "snapshot":
            return self.snapshot(SNAPSHOT_HISTORY_LINES if lines is None else lines)
        if action == "enter":
            self.enter()
        elif action == "esc":
            self.esc()
        elif action == "submit":
            self.submit()
        elif action == "choose":
            self.choose(args[0])
        elif action == "type":
            self.type(args[0])
        else:
            self.clear_then(args[0])
        return ""


def usage_lines(session: str, actions: Sequence[str] = ACTIONS) -> list[str]:
    """``hookbus tmux SESSION ACTION [ARG]`` lines, one per action (the wake message's
    [AVAILABLE ACTIONS] section lists the ones that apply)."""
    return [f"hookbus tmux {session} {a} {ACTION_ARGUMENT.get(a, '')}".rstrip() for a in actions]
