"""``hookbus tmux SESSION ACTION [ARG]``: drive a supervised agent's tmux session.

Exit codes: 0 ok, 1 error (no such session, no tmux server, bad argument).
"""

from __future__ import annotations

from typing import Annotated

import typer

from hookbus.cli.support import EXIT_ERROR, fail


def tmux(
    session: Annotated[str, typer.Argument(help="tmux session name (exact match).")],
    action: Annotated[
        str,
        typer.Argument(help="snapshot, enter, esc, submit, choose N, type TEXT or clear_then CMD."),
    ],
    args: Annotated[
        list[str] | None,
        typer.Argument(
            help="N for choose, TEXT for type, CMD for clear_then (use -- before "
            "text that starts with '-')."
        ),
    ] = None,
    socket_name: Annotated[
        str | None,
        typer.Option(
            "--socket-name",
            "-L",
            envvar="HOOKBUS_TMUX_SOCKET_NAME",
            help="tmux server socket name (tmux -L).",
        ),
    ] = None,
    socket_path: Annotated[
        str | None,
        typer.Option(
            "--socket-path",
            "-S",
            envvar="HOOKBUS_TMUX_SOCKET_PATH",
            help="tmux server socket path (tmux -S).",
        ),
    ] = None,
    lines: Annotated[
        int | None, typer.Option("--lines", min=0, help="snapshot: history lines above the pane.")
    ] = None,
    delay: Annotated[
        float, typer.Option("--delay", min=0.0, help="clear_then: seconds between /clear and CMD.")
    ] = 1.0,
) -> None:
    """Drive a supervised agent's session: snapshot, enter, esc, submit, choose N, type, clear_then.

    type TEXT is sent literally (tmux send-keys -l), never through a shell."""
    from hookbus.errors import TmuxError
    from hookbus.supervisor.tmux_driver import TmuxDriver, TmuxServer

    driver = TmuxDriver(session, TmuxServer(socket_name=socket_name, socket_path=socket_path))
    try:
        if action == "clear_then" and args:
            driver.clear_then(" ".join(args), delay_s=delay)
            return
        out = driver.perform(action, list(args or []), lines=lines)
    except TmuxError as exc:
        fail(str(exc), EXIT_ERROR)
    if out:
        typer.echo(out, nl=not out.endswith("\n"))
