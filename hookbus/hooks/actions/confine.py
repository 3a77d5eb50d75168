"""What keeps a shell hook's processes in their run and out of the worker's secrets.

* **Every process a hook starts dies with the run**. A process group is
  not enough: ``setsid sleep 1000 &`` or a double fork leaves it. So each run is started as
  the first process of its own PID namespace (``unshare --pid --fork --kill-child``): when
  that process exits, or the run is killed at its timeout, the kernel kills every other
  process in the namespace, however it detached.
* **A hook cannot read the worker's secrets**: the worker marks itself non-dumpable
  (``prctl(PR_SET_DUMPABLE, 0)``), so ``/proc/<worker>/environ`` and ``mem`` need
  ``CAP_SYS_PTRACE`` over it; the hook gets none: it runs in its own user namespace
  (``--user --map-root-user``), or, where only the PID namespace is allowed (root without
  user namespaces), with every capability dropped (``setpriv``). ``unshare`` itself is started
  with the hook's scrubbed environment, so no process between them holds the secrets.

* **An agent-written hook runs in a sandbox** (:mod:`hookbus.hooks.actions.sandbox`,
  bubblewrap): its own mount, PID, network, IPC and user namespaces holding only a
  read-only runtime and its folder, an environment built from scratch, resource limits, and
  no privilege at any step (a root worker's hook runs as :func:`agent_uid`, ``nobody`` by
  default). Where that sandbox cannot be built, an agent's hook is refused
  (:func:`agent_refusal`) unless the operator sets ``allow_unconfined_agent_hooks``.

The best of these the kernel allows is probed once per process. Where none is allowed
(an unprivileged user on a host that forbids user namespaces), hooks still run, in a process
group killed at the end, and :func:`confinement` says so for the worker to report.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import pwd
import shutil
import subprocess
import sys
import threading

from hookbus.hooks.actions import sandbox
from hookbus.hooks.actions.sandbox import Limits

logger = logging.getLogger(__name__)

_PR_SET_DUMPABLE = 4
#: How :func:`agent_confinement` starts when an agent's hook is fully confined.
AGENT_CONFINED = "no network, writes"
_PROBE_TIMEOUT_S = 5.0

_lock = threading.Lock()
_prefix: tuple[str, ...] | None = None
_mode = "unprobed"
_agent_mode = "unprobed"
_hardened = False
_limits = Limits()


def _works(argv: list[str], cwd: str | None = None) -> bool:
    try:
        done = subprocess.run(
            [*argv, "true"],
            capture_output=True,
            timeout=_PROBE_TIMEOUT_S,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            cwd=cwd,
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


def confinement_prefix() -> tuple[str, ...]:
    """The argv prefix that confines one hook run (empty when nothing is available)."""
    global _prefix, _mode
    with _lock:
        if _prefix is None:
            _prefix, _mode = _probe()
            if _prefix:
                logger.info("shell hooks run confined: %s", _mode)
            else:
                logger.warning("shell hooks run unconfined: %s", _mode)
        return _prefix


#: The user agent-written hooks run as when the worker is root, unless
#: ``security.agent_hook_user`` names another (:func:`configure_agent_user`).
AGENT_USER = "nobody"
_OVERFLOW_ID = 65534
_agent_user = AGENT_USER


def configure_agent_user(name: str) -> None:
    """Set the user (a name or a numeric uid) a root worker runs agent-written hooks as;
    a change is probed again on next use."""
    global _agent_user, _agent_mode
    with _lock:
        if name != _agent_user:
            _agent_user = name
            _agent_mode = "unprobed"


def agent_ids() -> tuple[int, int] | None:
    """(uid, gid) an agent-written hook runs as, or None when it keeps the worker's (a
    worker that is not root is already unprivileged; its hooks run in a user namespace).
    Raises ValueError when the configured user cannot be used (unknown, or root)."""
    if os.geteuid() != 0:
        return None
    name = _agent_user
    if name.isdigit():
        ids = (int(name), int(name))
    else:
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            if name != AGENT_USER:
                raise ValueError(f"security.agent_hook_user {name!r} names no user") from None
            ids = (_OVERFLOW_ID, _OVERFLOW_ID)  # the kernel's overflow id: unprivileged
        else:
            ids = (entry.pw_uid, entry.pw_gid)
    if ids[0] == 0 or ids[1] == 0:
        raise ValueError(f"security.agent_hook_user {name!r} is root; name an unprivileged user")
    return ids


def agent_uid() -> int | None:
    """The uid of :func:`agent_ids`, or None (not root, or no usable user configured)."""
    try:
        ids = agent_ids()
    except ValueError:
        return None
    return None if ids is None else ids[0]


def configure_limits(limits: Limits) -> None:
    """Set the resource limits of agents' sandboxed runs (``security.agent_*``)."""
    global _limits, _agent_mode
    with _lock:
        if limits != _limits:
            _limits, _agent_mode = limits, "unprobed"


def limits() -> Limits:
    """The resource limits agents' sandboxed runs get."""
    return _limits


def sandbox_ready() -> bool:
    """Whether agents' hooks run in the sandbox here (probing on first use)."""
    return agent_confinement().startswith(AGENT_CONFINED)


def _probe_agent() -> str:
    try:
        ids = agent_ids()
    except ValueError as exc:
        return f"no confinement of their own (root, but {exc}): they would run as root"
    ok, words = sandbox.probe(ids, _limits)
    if not ok:
        return f"no confinement of their own: {words}"
    who = "" if ids is None else f", as uid {ids[0]} ({_agent_user})"
    return (
        f"{AGENT_CONFINED} only inside their own folder, private /proc and mounts, "
        f"environment from scratch, {words}{who}"
    )


def confinement() -> str:
    """How shell hooks are confined here, in words (probing on first use)."""
    confinement_prefix()
    return _mode


def agent_confinement() -> str:
    """How agent-written shell hooks are confined, in words (starts with
    :data:`AGENT_CONFINED` when they run in the sandbox: no network, writes walled in)."""
    global _agent_mode
    with _lock:
        if _agent_mode == "unprobed":
            _agent_mode = _probe_agent()
            log = logger.info if _agent_mode.startswith(AGENT_CONFINED) else logger.warning
            log("agent-written shell hooks: %s", _agent_mode)
        return _agent_mode


#: The setting that lets agent-written code run where it cannot be confined.
OPT_IN = "security.allow_unconfined_agent_hooks"


def agent_refusal(hook_id: str, *, in_process: bool = False) -> str | None:
    """Why an agent-written hook may not run here, or None when it may.

    An agent's shell (or python script) hook runs only fully confined: no network and writes
    only inside its folder. Where the kernel gives less, running it would hand an agent's code
    the worker's network and file system, so it is refused (the hook's ``on_error`` answers)
    unless the operator sets :data:`OPT_IN`. An in-process python action can never be
    confined (it runs inside the worker), so an agent's is always refused without the opt-in.
    """
    if in_process:
        return (
            f"refused: agent-written in-process python hook {hook_id!r} would run inside the "
            f"worker, where nothing confines it; write it as a script hook (hooks write "
            f"--spec with script + language) or set {OPT_IN} = true to run it anyway"
        )
    mode = agent_confinement()
    if mode.startswith(AGENT_CONFINED):
        return None
    return (
        f"refused: agent-written hook {hook_id!r} cannot be confined on this machine ({mode}); "
        f"set {OPT_IN} = true to run agent hooks unconfined"
    )


def describe(*, allow_unconfined_agent_hooks: bool = False) -> str:
    """One short line for a worker's heartbeat (``confinement``) and start-up log: how
    hooks are confined, and what happens to agent-written ones. Starts with ``none`` when
    hooks run unconfined (``hookbus status`` warns on that)."""
    base = confinement()
    agent = agent_confinement()
    if agent.startswith(AGENT_CONFINED):
        agents = f"agent hooks: {agent}"
    elif allow_unconfined_agent_hooks:
        agents = f"agent hooks run UNCONFINED ({OPT_IN}): {agent}"
    else:
        agents = f"agent hooks refused: {agent}"
    return f"{base}; {agents}"


def start_worker(
    *,
    allow_unconfined_agent_hooks: bool = False,
    agent_hook_user: str = AGENT_USER,
    agent_limits: Limits | None = None,
) -> str:
    """What every worker role calls at start: mark the process non-dumpable, set the user a
    root worker runs agents' hooks as, probe the confinement, say it in the log (a warning
    when hooks or agents' hooks run unconfined or agents' hooks will be refused) and return
    the line its heartbeat carries."""
    harden_worker()
    configure_agent_user(agent_hook_user)
    configure_limits(agent_limits or Limits())
    line = describe(allow_unconfined_agent_hooks=allow_unconfined_agent_hooks)
    calm = not line.startswith("none") and "agent hooks: " in line
    (logger.info if calm else logger.warning)("hook confinement: %s", line)
    return line


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
