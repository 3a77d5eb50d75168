"""Whether a TCP port can be listened on, and who holds it when it cannot.

A server started on a port another process holds fails late, inside uvicorn, with a raw bind
error, after it printed a URL that reaches the other process. The CLI asks first: it binds
the port once (and lets it go), and on ``EADDRINUSE`` names the process listening there,
read from ``/proc`` (Linux; elsewhere, or without the right to read another user's
``/proc/<pid>/fd``, it says only that the port is taken).
"""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

#: The state of a listening socket in ``/proc/net/tcp``.
_LISTEN = "0A"


def taken(host: str, port: int) -> str | None:
    """None when ``host:port`` can be listened on; else why not, in words."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                return f"{host}:{port} cannot be listened on: {exc.strerror}"
            holder = holder_of(port)
            return f"port {port} is taken" + (f" by {holder}" if holder else "")
    return None


def holder_of(port: int) -> str | None:
    """``pid N (command line)`` of the process listening on ``port``, when ``/proc`` says."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if (
                len(fields) > 9
                and fields[3] == _LISTEN
                and int(fields[1].rsplit(":", 1)[1], 16) == port
            ):
                inodes.add(fields[9])
    if not inodes:
        return None
    wanted = {f"socket:[{inode}]" for inode in inodes}
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            links = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
        except OSError:
            continue
        if links & wanted:
            try:
                raw = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                raw = b""
            command = raw.replace(b"\0", b" ").decode(errors="replace").strip()[:120]
            return f"pid {pid} ({command})" if command else f"pid {pid}"
    return None
