"""Secrets off command lines and out of files other users can read.

A process's command line is world-readable (``ps``, ``/proc/<pid>/cmdline``), and so is a
``hookbus.toml`` left at the usual 0644: a Redis password or a gateway token in either is
every local user's, a hook running as ``nobody`` included. The alternatives are a variable
(``HOOKBUS_REDIS_URL``, ``HOOKBUS_GATEWAY_TOKEN``: readable only by the process's own user)
or a file of mode 0600 named by one (``HOOKBUS_REDIS_URL_FILE``, ``--token-file``).

Standard library only: the per-event agent hook and the lean command dispatcher import it.
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs ~2 ms per process
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

#: Variable naming a file whose first line is the Redis URL (credentials included).
REDIS_URL_FILE_ENV = "HOOKBUS_REDIS_URL_FILE"
#: Options whose value is a secret on any command line.
SECRET_OPTIONS = {
    "--token": "--token-file FILE (or HOOKBUS_GATEWAY_TOKEN)",
}


def url_has_password(url: str) -> bool:
    """Whether ``url`` carries a password (``redis://user:pw@host``, ``redis://:pw@host``)."""
    _, sep, rest = url.partition("://")
    if not sep:
        return False
    userinfo, at, _ = rest.split("/", 1)[0].rpartition("@")
    return bool(at) and userinfo.partition(":")[2] != ""


def command_line_warnings(args: Sequence[str]) -> list[str]:
    """A warning for each secret given on this command line: ``--redis-url`` with a
    password, ``--token``."""
    found: list[str] = []
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if not eq:
            value = args[i + 1] if i + 1 < len(args) else ""
        if name == "--redis-url" and url_has_password(value):
            found.append(
                "--redis-url carries a password on the command line, where every local user "
                "can read it (ps, /proc/PID/cmdline); put the URL in a file of mode 600 and "
                f"name it with {REDIS_URL_FILE_ENV} (or set HOOKBUS_REDIS_URL)"
            )
        elif name in SECRET_OPTIONS and value:
            found.append(
                f"{name} puts a secret on the command line, where every local user can read "
                f"it (ps, /proc/PID/cmdline); use {SECRET_OPTIONS[name]}"
            )
    return found


def read_url_file(path: str) -> str:
    """The URL in ``path`` (its first non-empty line); OSError / ValueError say why not."""
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                return line.strip()
    raise ValueError(f"{REDIS_URL_FILE_ENV}={path} is empty")


def readable_by_others(path: str) -> int | None:
    """The file's permission bits when users other than its owner may read it, else None."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return stat.S_IMODE(mode) if mode & (stat.S_IRGRP | stat.S_IROTH) else None


def config_file_warning(path: str, data: Mapping[str, object]) -> str | None:
    """The warning for a configuration file that holds a password and that other users may
    read; None when it holds none or is private."""
    rq = data.get("rq")
    urls = [data.get("redis_url"), rq.get("redis_url") if isinstance(rq, dict) else None]
    if not any(isinstance(url, str) and url_has_password(url) for url in urls):
        return None
    mode = readable_by_others(path)
    if mode is None:
        return None
    return (
        f"{path} holds a Redis password and other users can read it (mode {mode:o}); "
        f"chmod 600 {path}, or move the URL to a file of mode 600 named by {REDIS_URL_FILE_ENV}"
    )
