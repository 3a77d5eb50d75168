"""What keeps a shell hook's processes in their run and out of the worker's secrets.

* **Every process a hook starts dies with the run** (issue 13 row 7). A process group is
  not enough: ``setsid sleep 1000 &`` or a double fork leaves it. So each run is started as
  the first process of its own PID namespace (``unshare --pid --fork --kill-child``): when
  that process exits, or the run is killed at its timeout, the kernel kills every other
  process in the namespace, however it detached.
* **A hook cannot read the worker's secrets** (row 6): the worker marks itself non-dumpable
  (``prctl(PR_SET_DUMPABLE, 0)``), so ``/proc/<worker>/environ`` and ``mem`` need
  ``CAP_SYS_PTRACE`` over it; the hook gets none: it runs in its own user namespace
  (``--user --map-root-user``), or, where only the PID namespace is allowed (root without
  user namespaces), with every capability dropped (``setpriv``). ``unshare`` itself is started
  with the hook's scrubbed environment, so no process between them holds the secrets.

* **An agent-written hook has no network** (issue 13, "Also"): its namespace set includes
  a network namespace of its own (``--net``: no interface but a down loopback). The http
  action, whose destinations are checked (:mod:`hookbus.hooks.actions.egress`), is how an
  agent's hook reaches the network. Writes are not yet confined to a scratch folder here.

The best of these the kernel allows is probed once per process. Where none is allowed
(an unprivileged user on a host that forbids user namespaces), hooks still run, in a process
group killed at the end, and :func:`confinement` says so for the worker to report.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import shutil
import subprocess
import sys
import threading

logger = logging.getLogger(__name__)

_PR_SET_DUMPABLE = 4
_PROBE_TIMEOUT_S = 5.0

_lock = threading.Lock()
_prefix: tuple[str, ...] | None = None
_offline: tuple[str, ...] | None = None
_mode = "unprobed"
_hardened = False


def _works(argv: list[str]) -> bool:
    try:
        done = subprocess.run(
            [*argv, "true"],
            capture_output=True,
            timeout=_PROBE_TIMEOUT_S,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _probe() -> tuple[tuple[str, ...], str]:
    if not sys.platform.startswith("linux"):
        return (), "none (not Linux): a hook's detached processes may outlive its run"
    unshare = shutil.which("unshare")
    if unshare is None:
        return (), "none (no unshare binary): a hook's detached processes may outlive its run"
    pid_ns = [unshare, "--pid", "--fork", "--kill-child"]
    with_user = [unshare, "--user", "--map-root-user", "--pid", "--fork", "--kill-child"]
    if _works(with_user):
        return tuple(with_user), "pid+user namespace"
    setpriv = shutil.which("setpriv")
    if _works(pid_ns):
        if os.geteuid() == 0 and setpriv is not None:
            drop = [setpriv, "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
            if _works([*pid_ns, *drop]):
                return (*pid_ns, *drop), "pid namespace, capabilities dropped"
        return tuple(pid_ns), "pid namespace"
    return (), (
        "none (the kernel allows this user neither a PID nor a user namespace): a hook's "
        "detached processes may outlive its run"
    )


def confinement_prefix(*, network: bool = True) -> tuple[str, ...]:
    """The argv prefix that confines one hook run (empty when nothing is available);
    ``network=False`` adds a network namespace of its own where the kernel allows one."""
    global _prefix, _offline, _mode
    with _lock:
        if _prefix is None:
            _prefix, _mode = _probe()
            if _prefix:
                logger.info("shell hooks run confined: %s", _mode)
            else:
                logger.warning("shell hooks run unconfined: %s", _mode)
        if network:
            return _prefix
        if _offline is None:
            _offline = ()
            if _prefix and os.path.basename(_prefix[0]) == "unshare":
                candidate = (_prefix[0], "--net", *_prefix[1:])
                if _works(list(candidate)):
                    _offline = candidate
            if not _offline:
                logger.warning("agent-written shell hooks keep the network: no network namespace")
        return _offline or _prefix


def confinement() -> str:
    """How shell hooks are confined here, in words (probing on first use)."""
    confinement_prefix()
    return _mode


def harden_worker() -> None:
    """Mark this process non-dumpable, once: its ``/proc`` files (``environ`` with the Redis
    password, ``mem``) become unreadable to processes without ``CAP_SYS_PTRACE`` over it."""
    global _hardened
    if _hardened or not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            logger.warning("could not mark the worker non-dumpable (errno %d)", ctypes.get_errno())
            return
    _hardened = True
